"""What the drill asks about: the symptoms a pager shows, and the menus of answers (what p99
means, the signal to read, the fix) with the right one for each cause, and the classic mistakes."""

from __future__ import annotations

from dataclasses import dataclass

from itlkit.diagnosis.scoring import CAUSES


@dataclass(frozen=True)
class Symptom:
    """What the pager says, and the ranking of CAUSES that fits it best."""

    key: str
    text: str  # formatted with p50 (the observed ITL p50)
    ranking: tuple[str, ...]


SYMPTOMS: dict[str, Symptom] = {
    "bimodal": Symptom(
        "bimodal",
        "TTFT p99 is within its SLO, ITL p99 is not. ITL p50 is {p50}. The ITL histogram has "
        "two humps: most gaps sit near p50, and a second, much slower group shows up in bursts "
        "when new requests arrive.",
        CAUSES,
    ),
    "shift": Symptom(
        "shift",
        "TTFT is fine but ITL is worse than last month. The histogram still has one hump, but "
        "the whole hump has slid to the right; p50 is now {p50} and rises and falls with "
        "vllm:num_requests_running over the day.",
        ("batch_or_context_growth", "prefill_interference", "host_overhead", "preemption"),
    ),
    "host": Symptom(
        "host",
        "TTFT is fine, ITL is bad all day. One narrow hump at p50 {p50}, far above what the "
        "hardware should need, no bursts with arrivals, and it barely improves when traffic "
        "drops at night.",
        ("host_overhead", "batch_or_context_growth", "prefill_interference", "preemption"),
    ),
    "gaps": Symptom(
        "gaps",
        "TTFT is fine and ITL p50 ({p50}) looks normal, but a few requests see pauses of "
        "several seconds between tokens; vllm:num_preemptions_total climbs during traffic "
        "bursts, when KV-cache usage reaches 100%.",
        ("preemption", "batch_or_context_growth", "prefill_interference", "host_overhead"),
    ),
    # a speculative deployment's symptom: posed only with speculation on (`Scenario.speculation`)
    # and not drawn by weight
    "speculation": Symptom(
        "speculation",
        "TTFT is fine. Since speculative decoding was switched on for every request, tokens "
        "reach users more slowly at the daily peak than before (TPOT up), though at night, with "
        "few requests, streams are faster than ever. The ITL histogram has one hump at p50 "
        "{p50}; vllm:num_preemptions_total is flat.",
        (
            "speculation_cost",
            "batch_or_context_growth",
            "host_overhead",
            "prefill_interference",
            "preemption",
        ),
    ),
}
SYMPTOM_WEIGHTS = {"bimodal": 0.55, "shift": 0.15, "host": 0.15, "gaps": 0.15}

# The labels are noun phrases and the fixes imperatives, as the feedback quotes them: "You chose
# <p99 or signal>", "You chose to <fix>".
# The causes as noun phrases, for feedback sentences ("It is the fingerprint of ..."); the
# ranking menus show the diagnosis' TITLES, which are clauses ("the batch or the context grew").
CAUSE_NAMES = {
    "prefill_interference": "prefill interference",
    "batch_or_context_growth": "batch or context growth",
    "host_overhead": "host overhead",
    "preemption": "preemption",
    "speculation_cost": "speculation past its crossover",
}

P99_CHOICES = {
    "slowest_request": "the slowest 1% of requests: a few unlucky users",
    "slow_steps": "the slowest 1% of token gaps: the engine steps that carried extra work",
    "mean_plus_sigma": "the mean plus about two standard deviations",
}
P99_RIGHT = "slow_steps"

SIGNALS = {
    "itl_buckets_vs_arrivals": (
        "the ITL histogram's buckets (slow share) against the arrival rate "
        "(rate of vllm:time_to_first_token_seconds_count)"
    ),
    "p50_vs_running": "how ITL p50 moves with the running requests and their context",
    "nsight_gaps": "an Nsight Systems trace: idle gaps between kernels",
    "preemptions": "the rate of vllm:num_preemptions_total and the KV-cache usage",
    "spec_counters": (
        "the accepted drafts per draft (vllm:spec_decode_num_accepted_tokens_total over "
        "vllm:spec_decode_num_drafts_total) against the running requests"
    ),
    "gpu_utilisation": "the GPU utilisation (nvidia-smi / DCGM)",
    "mean_itl": "the mean ITL over the last hour",
}
SIGNAL_FOR_CAUSE = {
    "prefill_interference": "itl_buckets_vs_arrivals",
    "batch_or_context_growth": "p50_vs_running",
    "host_overhead": "nsight_gaps",
    "preemption": "preemptions",
    "speculation_cost": "spec_counters",
}

FIXES = {
    "lower_budget": "shrink max_num_batched_tokens (tokens per engine step)",
    "disaggregate": "disaggregate prefill from decode",
    "cap_or_fp8_kv": "cap max_num_seqs or quantise the KV cache to FP8",
    "add_replicas": "add GPUs / replicas",
    "cuda_graphs": (
        "turn CUDA graphs on, and keep sampling and detokenising from blocking the next step"
    ),
    "chunked_off": "turn chunked prefill off",
    "mixed_chunk": "turn on SGLang's --enable-mixed-chunk (the decodes ride in each prefill batch)",
    "fewer_drafts": (
        "shrink num_speculative_tokens, or turn speculation off above the batch where it stops "
        "paying"
    ),
}
FIXES_FOR_CAUSE = {
    "prefill_interference": ("lower_budget", "disaggregate"),
    "batch_or_context_growth": ("cap_or_fp8_kv", "add_replicas"),
    "host_overhead": ("cuda_graphs",),
    "preemption": ("cap_or_fp8_kv", "add_replicas"),
    "speculation_cost": ("fewer_drafts",),
}
# Where an engine's schedule adds a fix: SGLang's prefill batches run alone unless mixed.
ENGINE_FIXES_FOR_CAUSE = {
    "sglang": {"prefill_interference": ("mixed_chunk", "lower_budget", "disaggregate")},
}


def fixes_for(cause: str, engine: str) -> tuple[str, ...]:
    """The fixes that address `cause` on `engine` (the first is the one feedback recommends)."""
    return ENGINE_FIXES_FOR_CAUSE.get(engine, {}).get(cause) or FIXES_FOR_CAUSE[cause]


MISTAKES = {
    "floor_from_weights_alone": "floor from the weights alone",
    "p99_as_slowest_request": "p99 read as the slowest request",
    "budget_without_ttft_check": "token budget lowered without checking TTFT p99",
    "gpu_utilisation": "GPU utilisation as the signal",
}
