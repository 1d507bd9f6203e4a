"""The API server's prompt intake where the simulation leaves it out: how long a burst's
prompts may wait to reach the engine, said where it could matter.

vLLM's OpenAI server tokenizes prompts one at a time (`sim.intake`). The simulation takes a
run's prompts in at 10 us per prompt token in front of the engine for the releases whose runs
here show it (vLLM 0.5.4 to 0.10.1.1, `versions.SERIAL_INTAKE_BEFORE`), and not for
later ones or a run that names no release.

How long the intake takes per prompt token is measured where the engine had nearly nothing to
compute: bursts whose prompts the prefix cache already held. Between two such bursts of one
server, the TTFT mean grows by 8-15 us per prompt token more ahead of the mean request:
dennislee22's Qwen2-7B rows D3/D6, D6/D9, D19/D22 and D48/D49 (8.2-12.1 us, A100 hosts), and
surajssd/llm-k8s' burst of 200 cached ShareGPT prompts against its cached run at 4 requests/s,
where few wait (14.6 us, an A100 40 GB host). A Qwen2.5-32B pair (D58/D59) grows by 28 us per
token, where each prompt taken in also waits for a step of the larger model: not counted in the
range. Where the simulation leaves the intake out, a burst whose mean wait there reaches half the
predicted TTFT mean (`MATERIAL_SHARE`) says so, with the range: where the engine is slower per
prompt than the intake, the engine's own queue hides it.
"""

from __future__ import annotations

from itlkit.sim.runs import Run
from itlkit.sim.versions import intake_seconds_per_prompt_token

# Seconds per prompt token ahead in the intake queue: the range the cached bursts measured
# (`sim.intake` simulates the middle of it).
INTAKE_RANGE_SECONDS_PER_PROMPT_TOKEN = (8e-6, 15e-6)
MATERIAL_SHARE = 0.5  # a wait below this share of the predicted TTFT mean goes unsaid


def intake_wait_seconds(run: Run) -> tuple[float, float] | None:
    """(low, high) mean time a vLLM burst's requests wait at intake behind the prompts sent
    before them: (n - 1) / 2 prompts for the mean request. Its own prompt's intake is left out:
    a one-prompt run has it, and the calibration's fixed TTFT seconds are fitted to such runs.
    None for other clients and engines, where the prompt length is unknown, or where the
    simulation takes the prompts in itself (the run's release, `versions`)."""
    w = run.workload
    tokens, n = w.prompt_tokens, w.num_prompts
    if w.client != "burst" or run.serving_engine != "vllm" or not n or tokens is None:
        return None
    if intake_seconds_per_prompt_token(run.release):
        return None
    ahead = (n - 1) / 2 * tokens
    low, high = INTAKE_RANGE_SECONDS_PER_PROMPT_TOKEN
    return low * ahead, high * ahead


def intake_caveat(run: Run, ttft_mean_seconds: float) -> str | None:
    """One line where a burst's intake wait could reach MATERIAL_SHARE of the predicted TTFT
    mean (None otherwise): the prediction leaves that wait out."""
    wait = intake_wait_seconds(run)
    if wait is None or wait[1] < MATERIAL_SHARE * ttft_mean_seconds:
        return None
    low, high = (f"{s * 1e6:g}" for s in INTAKE_RANGE_SECONDS_PER_PROMPT_TOKEN)
    w = run.workload
    return (
        f"a burst of {w.num_prompts:,} prompts of about {w.prompt_tokens:,} tokens: vLLM's API "
        "server tokenizes prompts one at a time, which the simulation leaves out for this "
        "release; at the "
        f"{low}-{high} us per prompt token that cached bursts measured, the mean request waits "
        f"{wait[0] * 1e3:,.0f}-{wait[1] * 1e3:,.0f} ms at intake before the engine sees it, "
        f"which could add up to that to the predicted TTFT mean ({ttft_mean_seconds * 1e3:,.0f} "
        "ms)"
    )
