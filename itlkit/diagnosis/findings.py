"""What each cause's numbers mean in words: evidence, what to check next, and priced fixes.

Nothing here decides: the scores come from `scoring`'s table. This module reads a `Fingerprint`
and writes the sentences a postmortem shows beside each score, pricing every fix with the step
model (a smaller token budget, FP8 KV, a cap on sequences).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from itlkit.diagnosis import sglang, speculation
from itlkit.diagnosis.evidence import Timeline
from itlkit.diagnosis.fingerprint import GAP_SECONDS, PLAUSIBLE_MBU_LOW, Cluster, Fingerprint
from itlkit.metrics.vllm_metrics import family
from itlkit.physics.roofline import Deployment, capacity, decode_step, mixed_step, prefill_cost
from itlkit.units import PRECISIONS, format_bytes, format_percent, format_seconds

TITLES = {
    "prefill_interference": "prefill chunks ride in decode steps",
    "batch_or_context_growth": "the batch or the context grew",
    "host_overhead": "host overhead between GPU kernels",
    "preemption": "preemption (KV cache full)",
    "speculation_cost": "speculative decoding costs more than it saves",
}
TYPICAL_MBU = 0.6  # real servers reach 50-70% of HBM bandwidth in decode
SMALL_BUDGET_TOKENS = 512  # the token budget the interference fix proposes


@dataclass(frozen=True)
class Fix:
    """One remedy, what it changes (computed), and what it costs."""

    action: str
    effect: str
    price: str


@dataclass(frozen=True)
class Finding:
    """One cause with its score, evidence, what to check next, and fixes."""

    cause: str
    score: float
    evidence: tuple[str, ...]
    confirm: tuple[str, ...]
    fixes: tuple[Fix, ...]
    engine: str = "vllm"  # whose metrics it judged: the title is in that engine's terms

    @property
    def title(self) -> str:
        return ENGINE_TITLES.get(self.engine, {}).get(self.cause) or TITLES[self.cause]


ENGINE_TITLES = {"sglang": sglang.TITLES}  # where an engine's schedule changes a cause's name


def knob(name: str, engine: str) -> str:
    """The engine's name for a vLLM setting a fix turns (`max_num_seqs` ...)."""
    return sglang.KNOBS.get(name, name) if engine == "sglang" else name


def bucket_text(bucket: tuple[float, float]) -> str:
    """A Prometheus bucket as (low, high] with its bounds in display units."""
    low, high = bucket
    return f"({format_seconds(low)}, {'+Inf' if math.isinf(high) else format_seconds(high)}]"


def cluster_text(c: Cluster, fp: Fingerprint) -> str:
    """One cluster in words: where it lies, what it holds, where it sits against floor and step."""
    high = "+Inf" if math.isinf(c.upper_seconds) else format_seconds(c.upper_seconds)
    text = (
        f"{100 * c.share:.2f}% ({c.observations:,.0f} obs) in {format_seconds(c.lower_seconds)}"
        f"-{high}, mean ~{format_seconds(c.mean_seconds)}"
    )
    if fp.floor_seconds > 0:
        text += f" = {c.mean_seconds / fp.floor_seconds:.1f}x the floor"
    main = fp.clusters[fp.main_cluster]
    if c is main:
        text += " (the main cluster: the ordinary step)"
    elif main.mean_seconds > 0:
        text += f", {c.mean_seconds / main.mean_seconds:.1f}x the main cluster"
    if c.behind_empty_bucket:
        text += ", behind an empty bucket"
    return text


def shape_sentence(fp: Fingerprint) -> str:
    """How many separated clusters the whole period's ITL histogram holds, each in words."""
    if not fp.clusters:
        return "the ITL histogram is empty"
    if len(fp.clusters) == 1:
        return "one cluster: " + cluster_text(fp.clusters[0], fp)
    return f"{len(fp.clusters)} separated clusters: " + "; ".join(
        cluster_text(c, fp) for c in fp.clusters
    )


# ---- prefill interference ---------------------------------------------------------------------
def _arrival_sentence(fp: Fingerprint, t: Timeline) -> str:
    if math.isfinite(fp.arrival_r):
        text = (
            f"slow-mode share per window vs first tokens per second (arrivals): r = "
            f"{fp.arrival_r:+.2f} over {fp.correlated_windows} windows"
        )
        if fp.running_varies and math.isfinite(fp.arrival_r_fixed):
            text += f"; {fp.arrival_r_fixed:+.2f} with running requests held fixed"
        return text
    if t.has_time_axis and np.isfinite(t.first_tokens_per_second).any():
        return "slow-mode share and arrivals do not vary enough to correlate"
    return "arrival correlation not available (no time axis or no TTFT count)"


def _per_arrival(fp: Fingerprint) -> tuple[str, ...]:
    if not math.isfinite(fp.side_per_arrival):
        return ()
    return (
        f"{fp.side_per_arrival:.1f} observations in slower clusters (below {GAP_SECONDS:g} s) per "
        f"arriving request (first tokens), with ~{fp.batch_size:.0f} running: a prefill step "
        "delays each stream decoding beside it once",
    )


def _interference_evidence(fp: Fingerprint, t: Timeline, dep: Deployment) -> tuple[str, ...]:
    if fp.correlated_windows == 0:
        return (
            shape_sentence(fp),
            *_per_arrival(fp),
            "no window has enough observations and buckets fine enough to tell a slow mode "
            "from a fast mode that moved" + (f" ({fp.split_warning})" if fp.split_warning else ""),
        )
    factor = fp.slow_mode_factor
    chunk = fp.max_num_batched_tokens - fp.batch_size
    return (
        shape_sentence(fp),
        *_per_arrival(fp),
        f"{100 * fp.window_slow_share:.1f}% of ITL observations sit in a slow mode "
        + (f"{factor:.1f}x" if math.isfinite(factor) else "far")
        + f" above each window's fast mode (overall fast mode ~"
        f"{format_seconds(fp.fast_mode_seconds)}, p99 "
        f"{format_seconds(fp.itl_quantiles_seconds[0.99])})",
        f"a step carrying a {chunk:,.0f}-token chunk beside {fp.batch_size:.0f} decodes should "
        f"take ~{format_seconds(fp.expected_mixed_step_seconds)} (max_num_batched_tokens "
        f"{fp.max_num_batched_tokens:,}, MFU {dep.mfu:g})",
        f"a step carrying one arriving prompt (~{fp.uncached_prompt_tokens:,.0f} of its "
        f"{fp.mean_prompt_tokens:,.0f} tokens left after the prefix cache) costs "
        f"{fp.arrival_chunk_factor:.1f}x a decode step by the step model",
        _arrival_sentence(fp, t),
    )


def _interference_fixes(fp: Fingerprint, dep: Deployment) -> tuple[Fix, ...]:
    small, budget, batch = SMALL_BUDGET_TOKENS, fp.max_num_batched_tokens, fp.batch_size
    expected = fp.expected_mixed_step_seconds
    slow_small = float(
        mixed_step(dep, batch_size=batch, context_tokens=fp.context_tokens, chunk_tokens=small)
        .step_seconds
    )  # fmt: skip
    prompt = max(round(fp.mean_prompt_tokens), 1)
    # vLLM's budget holds the decodes too (vllm/v1/core/sched/scheduler.py: running requests
    # are scheduled first from token_budget): the chunk is what they leave
    decodes = round(batch)
    steps_now = prefill_cost(dep, prompt_tokens=prompt, chunk_tokens=max(budget - decodes, 1))
    steps_small = prefill_cost(dep, prompt_tokens=prompt, chunk_tokens=small).steps
    shrink = (
        f"the slow step shrinks from ~{format_seconds(expected)} to ~{format_seconds(slow_small)}"
    )
    observed_slow = fp.slow_mode_factor * fp.fast_mode_seconds
    if math.isfinite(observed_slow) and expected > 0:
        # The step model sets the proportion; the observed slow mode sets the scale.
        shrink += (
            f" by the step model; scaled to the observed slow mode (~"
            f"{format_seconds(observed_slow)}), to ~"
            f"{format_seconds(slow_small * observed_slow / expected)}"
        )
    kv_transfer = prompt * dep.model.kv_bytes_per_token(dep.kv)
    return (
        Fix(
            f"lower max_num_batched_tokens from {budget:,} to {small + decodes:,}",
            shrink,
            f"TTFT rises: a {prompt:,}-token prompt needs {steps_small} chunked steps of "
            f"{small:,} prompt tokens beside {decodes} decodes instead of {steps_now.steps}; "
            "check TTFT p99 against its SLO",
        ),
        Fix(
            "disaggregate prefill from decode",
            "decode steps never carry a chunk: ITL stays near the ~"
            f"{format_seconds(fp.fast_mode_seconds)} fast mode (disaggregation alone: an FP8 "
            "KV cache or a lower max_num_seqs moves the fast mode itself)",
            f"separate prefill GPUs, and each prompt's KV ({format_bytes(kv_transfer)}) crosses "
            "the network before its first token",
        ),
        Fix(
            "keep the budget, and make the stalls a tracked number: an ITL p99 objective "
            "with an alert",
            "the stalls become a measured trade for faster first tokens",
            "ITL p99 stays near the slow mode",
        ),
    )


# ---- batch or context growth ------------------------------------------------------------------
def _growth_evidence(fp: Fingerprint, t: Timeline) -> tuple[str, ...]:
    if not math.isfinite(fp.fast_mode_growth):
        return ("growth over time cannot be judged without a time axis",)
    # The fast mode (p25) moves only when the floor moves; p50 also moves when more steps
    # carry chunks, which is interference, not growth.
    evidence = [
        f"the fast mode (window p25) moved {fp.fast_mode_growth:.2f}x from the first to the last "
        f"third of the period (p50 {fp.p50_growth:.2f}x) while the floor predicted from the "
        f"running requests moved {fp.floor_growth:.2f}x"
    ]
    if np.isfinite(t.running).any():
        r = fp.growth_correlation
        evidence.append(
            f"running requests went from {np.nanmin(t.running):.0f} to "
            f"{np.nanmax(t.running):.0f} (mean {fp.batch_size:.0f}); fast mode vs running: "
            + (f"r = {r:+.2f}" if math.isfinite(r) else "no variation to correlate")
        )
    return tuple(evidence)


def _growth_fixes(fp: Fingerprint, dep: Deployment) -> tuple[Fix, ...]:
    batch, context = fp.batch_size, fp.context_tokens
    kv_now = decode_step(dep, batch_size=batch, context_tokens=context)
    fp8 = dataclasses.replace(dep, kv=PRECISIONS["fp8"])
    kv_fp8 = decode_step(fp8, batch_size=batch, context_tokens=context)
    # The knee: past the batch whose KV read equals the weight read, KV dominates the floor.
    per_sequence = float(kv_now.kv_read_seconds) / batch
    cap_seqs = max(int(float(kv_now.weight_read_seconds) / per_sequence), 1) if per_sequence else 1
    target = float(decode_step(dep, batch_size=cap_seqs, context_tokens=context).floor_seconds)
    return (
        Fix(
            "quantize the KV cache to FP8",
            f"the KV term halves: {format_seconds(kv_now.kv_read_seconds)} -> "
            f"{format_seconds(kv_fp8.kv_read_seconds)} at {batch:.0f} sequences of "
            f"{context:,.0f} tokens",
            "a small accuracy risk; check quality on your evals",
        ),
        Fix(
            f"cap {knob('max_num_seqs', fp.engine)} near {cap_seqs}, where the KV read equals the "
            "weight read",
            f"the floor stays at or below ~{format_seconds(target)} (now ~"
            f"{format_seconds(fp.floor_seconds)} at batch {batch:.0f})",
            "requests beyond the cap queue instead of slowing everyone: TTFT rises under load",
        ),
        Fix("add replicas", "each replica runs a smaller batch", "more GPUs"),
    )


# ---- host overhead ----------------------------------------------------------------------------
def _host_evidence(fp: Fingerprint) -> tuple[str, ...]:
    p50 = fp.itl_quantiles_seconds[0.5]
    evidence = [
        f"the fast mode (p25 {format_seconds(fp.fast_mode_seconds)} overall, interpolated in "
        f"bucket {bucket_text(fp.itl_quantile_buckets[0.25])}) sits {fp.fast_over_floor:.1f}x "
        f"above the bandwidth floor ({format_seconds(fp.floor_seconds)} at batch "
        f"{fp.batch_size:.0f}), window by window: an MBU of {format_percent(fp.mbu_fit)} (real "
        "servers reach 50-70%)",
    ]
    overhead = p50 - fp.floor_seconds / TYPICAL_MBU
    if overhead > 0:
        evidence.append(
            f"p50 {format_seconds(p50)} leaves ~{format_seconds(overhead)} per step unexplained "
            f"even at {format_percent(TYPICAL_MBU)} MBU"
        )
    if math.isfinite(fp.host_excess_ratio):
        evidence.append(_host_room_sentence(fp))
    evidence.append(shape_sentence(fp))
    if fp.batch_size <= 16:
        evidence.append(
            f"small batch ({fp.batch_size:.0f}): a fixed per-step cost weighs most here"
        )
    return tuple(evidence)


def _host_room_sentence(fp: Fingerprint) -> str:
    """The step against the slowest plausible GPU time: what is left for the host, if anything."""
    excess = fp.step_seconds - fp.slowest_gpu_seconds
    base = (
        f"{format_seconds(fp.floor_seconds)} floor"
        if fp.slowest_gpu_seconds <= fp.floor_seconds / PLAUSIBLE_MBU_LOW
        else f"{format_seconds(fp.spec_verify_seconds)} speculative verification step"
    )
    step = (f"the step (~{format_seconds(fp.step_seconds)}, the main cluster's mean) is "
            f"~{format_seconds(abs(excess))} {'more' if excess > 0 else 'less'} than the slowest "
            f"plausible GPU time ({base} / {PLAUSIBLE_MBU_LOW:g})")  # fmt: skip
    healthy = (f"the {format_seconds(fp.healthy_host_seconds)} a healthy host spends per step "
               f"at batch {fp.batch_size:.0f} (calibration: vLLM 0.15.1 on H100)")  # fmt: skip
    if excess <= 0:
        return f"{step}: no time is left over for host overhead (compare {healthy})"
    return f"{step}: {fp.host_excess_ratio:.1f}x {healthy}"


def _host_fixes(fp: Fingerprint) -> tuple[Fix, ...]:
    return (
        Fix(
            "profile a handful of engine steps with Nsight Systems",
            "gaps between kernels on the GPU timeline show the host is the bottleneck",
            "minutes of profiling",
        ),
        Fix(
            "turn CUDA graphs on (drop --enforce-eager); keep sampling and detokenizing from "
            "blocking the next step",
            "removes launch and Python gaps: the step can fall toward "
            f"{format_seconds(fp.floor_seconds / TYPICAL_MBU)}",
            "more GPU memory for graph capture; some sampling options disable graphs",
        ),
    )


# ---- preemption -------------------------------------------------------------------------------
def _preemption_evidence(fp: Fingerprint, t: Timeline, dep: Deployment) -> tuple[str, ...]:
    gaps, count = fp.gap_observations, fp.observations
    evidence = [
        f"{gaps:,.0f} ITL observations above {GAP_SECONDS:g} s ({100 * gaps / count:.3f}% of "
        f"{count:,.0f})"
    ]
    if math.isfinite(fp.preemptions):
        evidence.append(f"{family('preemptions', t.engine)} rose by {fp.preemptions:,.0f} over "
                        "the period")  # fmt: skip
        if math.isfinite(fp.gap_correlation):
            evidence.append(
                f"preemptions vs multi-second gaps per window: r = {fp.gap_correlation:+.2f}"
            )
    else:
        evidence.append("no preemption counter in the metrics: judged from the gaps alone")
    if np.isfinite(t.kv_usage).any():
        evidence.append(_kv_usage_line(float(np.nanmax(t.kv_usage))))
    at_mean = capacity(dep, context_tokens=fp.context_tokens)
    if at_mean.weights_fit and fp.batch_size > at_mean.max_sequences:
        evidence.append(
            f"~{fp.batch_size:.0f} running sequences of ~{fp.context_tokens:,.0f} tokens need "
            f"more KV than the {format_bytes(at_mean.kv_budget_bytes)} left after weights (room "
            f"for {at_mean.max_sequences}): the cache runs full"
        )
    return tuple(evidence)


def _kv_usage_line(peak: float) -> str:
    """The KV-usage gauge's peak, unless it is outside the 0-1 fraction vLLM sets it to
    (`1 - free blocks / all blocks`; its HELP: "1 means 100 percent usage")."""
    if 0.0 <= peak <= 1.0 + 1e-9:
        return f"KV cache usage peaked at {format_percent(peak)}"
    return (
        f"the KV cache usage gauge reads {peak:g}, outside its 0-1 range (1 means 100%): "
        "the gauge is wrong (edited or mis-set), so it is not used"
    )


def _preemption_fixes(fp: Fingerprint, dep: Deployment) -> tuple[Fix, ...]:
    # A request holds its prompt and, by its end, all of its output: size the cap for that.
    prompt, context = fp.mean_prompt_tokens, fp.context_tokens
    longest = max(prompt + 2 * (context - prompt), context)
    cap = capacity(dep, context_tokens=longest)
    cap_fp8 = capacity(dataclasses.replace(dep, kv=PRECISIONS["fp8"]), context_tokens=longest)
    return (
        Fix(
            f"cap {knob('max_num_seqs', fp.engine)} at ~{cap.max_sequences}",
            f"{cap.max_sequences} sequences of {longest:,.0f} tokens (prompt + full output) fit "
            f"in {format_bytes(cap.kv_budget_bytes)} of KV per GPU",
            "requests beyond it wait in the queue (TTFT) instead of being evicted mid-stream",
        ),
        Fix(
            "quantize the KV cache to FP8",
            f"room for {cap_fp8.max_sequences} sequences instead of {cap.max_sequences}",
            "a small accuracy risk",
        ),
        Fix(f"raise {knob('gpu_memory_utilization', fp.engine)}, TP, or replicas", "more KV room",
            "more GPUs or less headroom"),
    )  # fmt: skip


CONFIRM = {  # {ttft}, {running}, ...: the engine's family names (`_confirm`)
    "speculation_cost": (
        "rate(vllm:spec_decode_num_accepted_tokens_total) / "
        "rate(vllm:spec_decode_num_drafts_total) over time: a drop after a deploy is the "
        "acceptance, not the scheduler",
        "a canary without speculation at the same load: its ITL p50 should beat this one's "
        "ITL p50 / tokens per step",
    ),
    "prefill_interference": (
        "plot rate({ttft}_count) beside the slow buckets' rate: the spikes should line up",
        "{step_tokens}",
    ),
    "batch_or_context_growth": (
        "plot {running} and the mean context (prompt + generated tokens) over the incident",
        "ITL p50 should track the floor predicted from those two numbers",
    ),
    "host_overhead": (
        "GPU utilisation says nothing here (near 100% either way); look at the kernel timeline",
        "if p50 barely changes with batch size, the cost is per step, not per token",
    ),
    "preemption": (
        "rate({preemptions}) should be non-zero exactly when the long gaps appear",
        "{kv_usage} near 1.0 before each preemption",
    ),
}


def explain(cause: str, score: float, fp: Fingerprint, t: Timeline, dep: Deployment) -> Finding:
    """The finding for one cause: its score with the evidence, checks and fixes in words."""
    if cause == "prefill_interference" and t.engine == "sglang":
        evidence = (shape_sentence(fp), *sglang.stall_evidence(fp), _arrival_sentence(fp, t))
        fixes = tuple(Fix(*f) for f in sglang.stall_fixes(fp, dep))
        return Finding(cause, score, evidence, _confirm(cause, t.engine), fixes, t.engine)
    evidence, fixes = {
        "prefill_interference": lambda: (
            _interference_evidence(fp, t, dep), _interference_fixes(fp, dep)),
        "batch_or_context_growth": lambda: (_growth_evidence(fp, t), _growth_fixes(fp, dep)),
        "host_overhead": lambda: (_host_evidence(fp), _host_fixes(fp)),
        "preemption": lambda: (_preemption_evidence(fp, t, dep), _preemption_fixes(fp, dep)),
        "speculation_cost": lambda: (speculation.cost_evidence(t.speculation, fp, dep),
                                     tuple(Fix(*f) for f in speculation.cost_fixes(
                                         t.speculation, fp, dep))),
    }[cause]()  # fmt: skip
    return Finding(cause, score, evidence, _confirm(cause, t.engine), fixes, t.engine)


STEP_TOKENS = {  # where each engine's metrics show a step's prompt tokens
    "vllm": "vllm:iteration_tokens_total: steps with thousands of tokens appear when prompts "
    "arrive",
    "sglang": 'rate(sglang:realtime_tokens_total{mode="prefill_compute"}): prompt tokens computed '
    "per second rise when prompts arrive",
}


def _confirm(cause: str, engine: str) -> tuple[str, ...]:
    """The cause's checks, in the engine's metric names."""
    names = {key: family(key, engine) for key in ("ttft", "running", "preemptions", "kv_usage")}
    lines = (sglang.CONFIRM if engine == "sglang" else {}).get(cause) or CONFIRM[cause]
    return tuple(line.format(**names, step_tokens=STEP_TOKENS[engine]) for line in lines)


def measurement_notes(fp: Fingerprint, dep: Deployment) -> list[str]:
    """Caveats about the measurement itself (context source, fit in memory, coarse buckets)."""
    notes = []
    if fp.context_from_counters:
        notes.append(
            f"mean context {fp.context_tokens:,.0f} tokens taken from the counters (prompt "
            f"{fp.mean_prompt_tokens:,.0f} + half of {fp.mean_output_tokens:,.0f} generated)"
        )
    cap = capacity(dep, context_tokens=fp.context_tokens)
    if not cap.weights_fit:
        notes.append(
            "the deployment as given does not fit in GPU memory "
            f"({cap.explain(batch_size=math.ceil(fp.batch_size))}); "
            "check the model, precision, TP and GPU"
        )
    if fp.itl_quantile_buckets[0.25][1] < fp.floor_seconds:
        notes.append(
            f"a quarter of the ITL observations (p25 in bucket "
            f"{bucket_text(fp.itl_quantile_buckets[0.25])}) are faster than the "
            f"{format_seconds(fp.floor_seconds)} bandwidth floor, which no real step can be: the "
            "deployment given (model, precision, TP, GPU, batch) is probably not the one measured"
        )
    if fp.split_warning:
        notes.append(f"buckets too coarse: {fp.split_warning}")
    return notes
