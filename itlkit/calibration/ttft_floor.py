"""The fastest an uncached prefill can deliver a run's first tokens: a floor that screens runs
whose prompts the prefix cache already held (an earlier run on the same server sent them, as a
repeated `vllm bench serve --seed` does), so that the TTFT pipeline is not fitted to them.

A measured TTFT mean below the floor cannot come from computing the prompts: the engine found
them cached, which the run does not say (it would carry `workload.repeat_share`). The TTFT
pipeline only adds time to the engine's, so such a run pulls it to zero for every other run.

The floor keeps only the matmuls every prompt token must pass through, at the GPU's dense peak:
2 FLOPs per active parameter, less the embedding (a row gather) and the LM head (vLLM computes
logits only for the positions it samples), split over the TP GPUs; no attention, no memory
reads, no all-reduce, no host time. Served first come first served, request i of a burst of n
prompts finishes no sooner than i + 1 prompts' worth of that work, so the burst's mean is
(n + 1) / 2 prompts when they are all one length (with drawn lengths, shortest first would beat
that order, so the floor keeps one prompt); any other client's mean is at least one prompt's.
`vllm bench serve` sends its first prompt once before measuring, so with the prefix cache on,
request 0 waits for no prompt: (n - 1) / 2 prompts for its burst, (n - 1) / n otherwise.
"""

from __future__ import annotations

from itlkit.physics.hardware import get_gpu, peak_flops_per_second
from itlkit.sim.lengths import Fixed
from itlkit.sim.runs import Run
from itlkit.units import PRECISIONS

# Weights whose matmuls may run on a GPU's narrowest tensor unit (FP4 on Blackwell and MI355X):
# the floor takes the highest peak the GPU lists, so that it stays a floor.
NARROW_WEIGHTS = ("int4",)


def prefill_flops_per_token(run: Run) -> float:
    """FLOPs of one prompt token's matmuls: 2 x (active parameters - embedding - LM head)."""
    m = run.model
    skipped = m.embedding_params + m.position_embedding_params + m.lm_head_params
    return 2.0 * (m.active_params - skipped)


def floor_peak_flops_per_second(run: Run) -> float:
    """Dense peak of one GPU for the run's weights (int4: the GPU's highest listed peak)."""
    gpu = get_gpu(run.gpu)
    if run.weights_precision in NARROW_WEIGHTS:
        return max(gpu.peak_flops_per_second.values())
    return peak_flops_per_second(gpu, PRECISIONS[run.weights_precision])


def ttft_floor_seconds(run: Run) -> float | None:
    """Lower bound of the run's TTFT mean for uncached prompts; None where the run's own
    prompts share prefixes (system prompts, repeats) or its prompt length is unknown."""
    w = run.workload
    tokens = w.prompt_tokens
    reused = w.repeat_share > 0 or w.prompts_sent_before > 0
    if tokens is None or reused or w.cycles_prompts or w.system_prompt_tokens:
        return None
    prompt_seconds = (
        tokens * prefill_flops_per_token(run) / (floor_peak_flops_per_second(run) * run.tp)
    )
    return _prompts_waited(run) * prompt_seconds


def _prompts_waited(run: Run) -> float:
    """Prompts' worth of prefill the mean request waits for, at least."""
    w = run.workload
    n = w.num_prompts or 0
    # `vllm bench serve` sent request 0's prompt before measuring: with the prefix cache on,
    # request 0 waits for none of it (`run_workload.ready_check_cached`)
    warm = w.arrival == "vllm-bench" and run.prefix_caching and n > 0
    one_length = w.prompt_distribution is None or isinstance(w.prompt_distribution, Fixed)
    if w.client == "burst" and n and one_length:
        return (n - 1) / 2 if warm else (n + 1) / 2
    return (n - 1) / n if warm else 1.0


def served_from_cache(run: Run) -> bool:
    """Whether the run's measured TTFT mean is below what uncached prompts need."""
    floor = ttft_floor_seconds(run)
    return floor is not None and run.measured["ttft_mean_seconds"] < floor


def cache_caveat(run: Run) -> str | None:
    """One line for a run whose measured TTFT beats the floor (None otherwise): why its
    predicted TTFT, for prompts computed, must come out higher than the measured one."""
    if not served_from_cache(run):
        return None
    measured_ms = run.measured["ttft_mean_seconds"] * 1e3
    return (
        f"the measured TTFT mean ({measured_ms:.0f} ms) is below the "
        f"{ttft_floor_seconds(run) * 1e3:.0f} ms its prompts' matmuls need at the GPU's dense "
        "peak: the prefix cache held them (an earlier run's, e.g. a repeated --seed), which the "
        "run does not say (workload.prompts_sent_before would); the predicted TTFT is for "
        "prompts computed"
    )
