"""What a diagnosis says differently of SGLang's metrics: its prefill stall and its knobs.

SGLang runs a prefill batch, when it can form one, before the running batch decodes
(`itlkit.sim.sglang` cites its scheduler). Where vLLM's interference is one slow step per chunk,
SGLang's is every running stream waiting out each prefill batch, and a queue of prompts holds
them for batch after batch: few stalls, long ones, past a second under load. The score reads
their time (`Fingerprint.stall_time_share`, `scoring.RULES`); this module words the evidence
and prices the fixes in SGLang's own flags.
"""

from __future__ import annotations

import math

from itlkit.diagnosis.fingerprint import SLOW_FACTOR, Fingerprint
from itlkit.physics.roofline import Deployment, step_seconds
from itlkit.units import format_bytes, format_seconds

TITLES = {"prefill_interference": "prefill batches stall the decodes"}

# SGLang's flag for each knob a fix turns (python/sglang/srt/arg_groups/fields, `sim.sglang`).
KNOBS = {
    "max_num_seqs": "--max-running-requests",
    "max_num_batched_tokens": "--chunked-prefill-size",
    "gpu_memory_utilization": "--mem-fraction-static",
}

CONFIRM = {
    "prefill_interference": (
        "plot rate({ttft}_count) beside the stalls: each burst of first tokens should come "
        "with a burst of long gaps",
        'rate(sglang:gpu_execution_seconds_total{{category="forward_extend"}}) (exported with '
        "SGLANG_ENABLE_METRICS_DEVICE_TIMER=1): the GPU's seconds per second in prefill "
        "batches, near the streams' share of time in stalls",
    ),
}
SMALL_CHUNK_TOKENS = 2048  # SGLang's smallest default chunk (GPUs below 20 GiB)


def mixing(fp: Fingerprint) -> bool:
    """Whether the device timer shows the decodes riding in the prefill batches
    (--enable-mixed-chunk): more GPU time in mixed batches than in prefill batches alone."""
    return math.isfinite(fp.mixed_share) and fp.mixed_share > fp.prefill_alone_share


def stall_evidence(fp: Fingerprint) -> tuple[str, ...]:
    """The prefill stall in numbers: the streams' time in stalls against what prefill needs."""
    cut = math.sqrt(SLOW_FACTOR)
    lines = [
        f"{100 * fp.stall_time_share:.1f}% of the streams' time is spent in gaps past ~{cut:.1f}x "
        f"each window's fast mode (~{format_seconds(fp.fast_mode_seconds)} overall), gaps over "
        "a second included",
    ]
    if math.isfinite(fp.prefill_load):
        lines.append(
            f"the prompts need ~{100 * fp.prefill_load:.0f}% of the GPU's time by the step model "
            "(prompt tokens per second after the prefix cache, in batches of "
            f"{fp.max_num_batched_tokens:,} tokens taking "
            f"~{format_seconds(fp.prefill_batch_seconds)}): where prefill runs alone the "
            "streams wait about that share"
        )
    if math.isfinite(fp.prefill_alone_share):
        mode = ("--enable-mixed-chunk is on: the decodes ride in the prefill batches" if mixing(fp)
                else "--enable-mixed-chunk is off (its default): the decodes wait")  # fmt: skip
        lines.append(
            f"SGLang's device timer (sglang:gpu_execution_seconds_total): the GPU ran prefill "
            f"batches alone {100 * fp.prefill_alone_share:.0f}% of the period and beside the "
            f"decodes {100 * fp.mixed_share:.0f}%: {mode}"
        )
    if not mixing(fp):
        lines.append(
            "SGLang runs each prefill batch before the running batch decodes unless "
            f"--enable-mixed-chunk: a batch of {fp.max_num_batched_tokens:,} prompt tokens alone "
            f"takes ~{format_seconds(fp.prefill_batch_seconds)} by the step model, and all "
            f"~{fp.batch_size:.0f} running streams wait it out; back-to-back batches add up"
        )
    return tuple(lines)


def stall_fixes(fp: Fingerprint, dep: Deployment) -> tuple[tuple[str, str, str], ...]:
    """SGLang's remedies for the stall, priced by the step model: (action, effect, price)."""
    chunk, batch = fp.max_num_batched_tokens, max(round(fp.batch_size), 1)
    kv = round(batch * fp.context_tokens)
    alone = fp.prefill_batch_seconds
    decode = step_seconds(dep, decode_tokens=batch, prefill_tokens=0, kv_tokens=kv)
    mixed = step_seconds(dep, decode_tokens=batch, prefill_tokens=max(chunk - batch, 1),
                         kv_tokens=kv)  # fmt: skip
    small = min(SMALL_CHUNK_TOKENS, chunk // 2) or 1
    small_alone = step_seconds(dep, decode_tokens=0, prefill_tokens=small, kv_tokens=0)
    prompt = max(round(fp.mean_prompt_tokens), 1)
    kv_bytes = prompt * dep.model.kv_bytes_per_token(dep.kv)
    mixed_fix = (
        "--enable-mixed-chunk",
        f"the decodes ride in each prefill batch: a stream's gap is one mixed step "
        f"(~{format_seconds(mixed)}: {chunk - batch:,} prompt tokens beside {batch} decodes) "
        f"instead of the batch alone and a decode step after it (~"
        f"{format_seconds(alone + decode)}), never several batches back to back",
        f"each batch holds {batch} fewer prompt tokens (the decodes take their place in "
        "--chunked-prefill-size): first tokens come a little later",
    )
    if mixing(fp):
        small_mixed = step_seconds(dep, decode_tokens=batch, prefill_tokens=max(small - batch, 1),
                                   kv_tokens=kv)  # fmt: skip
        shorter = (f"each mixed batch takes ~{format_seconds(small_mixed)} instead of "
                   f"~{format_seconds(mixed)}")  # fmt: skip
    else:
        shorter = (f"each prefill batch alone takes ~{format_seconds(small_alone)} instead of "
                   f"~{format_seconds(alone)}: shorter stalls, as much stalled time in "
                   "all")  # fmt: skip
    return (
        *(() if mixing(fp) else (mixed_fix,)),
        (
            f"lower --chunked-prefill-size from {chunk:,} to {small:,}",
            shorter,
            f"TTFT rises: a prompt of {prompt:,} tokens needs {-(-prompt // small)} batches "
            f"instead of {-(-prompt // chunk)}, and small batches use the GPU less well",
        ),
        (
            "disaggregate prefill from decode (SGLang's PD disaggregation)",
            "decode batches never wait for a prefill: ITL stays near the ~"
            f"{format_seconds(fp.fast_mode_seconds)} fast mode",
            f"separate prefill GPUs, and each prompt's KV ({format_bytes(kv_bytes)}) crosses "
            "the network before its first token",
        ),
    )
