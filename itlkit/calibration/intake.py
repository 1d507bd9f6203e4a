"""The API server's prompt intake, which the simulation leaves out: how long a burst's prompts
may wait to reach the engine, said where it could matter.

vLLM's OpenAI server tokenizes prompts one at a time: one worker thread
(`ThreadPoolExecutor(max_workers=1)` behind `_tokenize_prompt_input_async`,
vllm/entrypoints/openai/serving_engine.py, vllm-project/vllm @
7ded96b3c73f63400cdb048a73c34292ba862d99; vllm-project/vllm issue 19012: "we process each
request's tokenization sequentially"). Every prompt of a burst therefore reaches the engine only
after the prompts sent before it were taken in, however fast the engine is.

How long that takes per prompt token is measured here only where the engine had nearly
nothing to compute: bursts whose prompts the prefix cache already held. Between two such bursts
of one server, the TTFT mean grows by 8-15 us per prompt token more ahead of the mean request:
dennislee22's Qwen2-7B rows D3/D6, D6/D9, D19/D22 and D48/D49 (8.2-12.1 us, A100 hosts), and
surajssd/llm-k8s' burst of 200 cached ShareGPT prompts against its cached run at 4 requests/s,
where few wait (14.6 us, an A100 40 GB host). A Qwen2.5-32B pair (D58/D59) grows by 28 us per token,
where each prompt taken in also waits for a step of the larger model: not counted in the range.
Simulated as a serial queue in front of the engine (its departures as the engine's arrivals,
on the runs of vLLM 0.10 and earlier), it moved calibrate's leave-one-out TTFT error by no more
than the noise of a median (16.7% without it; 17.1, 16.1 and 16.7% at 5, 10 and 15 us per
token): the uncached bursts are ruled by the engine's own queue, and the one cached burst the
calibration replays is one run. So it is not simulated. Where the engine is slower per prompt
than the intake, the engine's own queue hides the intake's; a burst whose mean wait at intake
reaches half the predicted TTFT mean (`MATERIAL_SHARE`) says so, with the range.
"""

from __future__ import annotations

from itlkit.sim.runs import Run

# Seconds per prompt token ahead in the intake queue: the range the cached bursts measured.
INTAKE_SECONDS_PER_PROMPT_TOKEN = (8e-6, 15e-6)
MATERIAL_SHARE = 0.5  # a wait below this share of the predicted TTFT mean goes unsaid


def intake_wait_seconds(run: Run) -> tuple[float, float] | None:
    """(low, high) mean time a vLLM burst's requests wait at intake behind the prompts sent
    before them: (n - 1) / 2 prompts for the mean request. Its own prompt's intake is left out:
    a one-prompt run has it, and the calibration's fixed TTFT seconds are fitted to such runs.
    None for other clients and engines, or where the prompt length is unknown."""
    w = run.workload
    tokens, n = w.prompt_tokens, w.num_prompts
    if w.client != "burst" or run.serving_engine != "vllm" or not n or tokens is None:
        return None
    ahead = (n - 1) / 2 * tokens
    low, high = INTAKE_SECONDS_PER_PROMPT_TOKEN
    return low * ahead, high * ahead


def intake_caveat(run: Run, ttft_mean_seconds: float) -> str | None:
    """One line where a burst's intake wait could reach MATERIAL_SHARE of the predicted TTFT
    mean (None otherwise): the prediction leaves that wait out."""
    wait = intake_wait_seconds(run)
    if wait is None or wait[1] < MATERIAL_SHARE * ttft_mean_seconds:
        return None
    low, high = (f"{s * 1e6:g}" for s in INTAKE_SECONDS_PER_PROMPT_TOKEN)
    w = run.workload
    return (
        f"a burst of {w.num_prompts:,} prompts of about {w.prompt_tokens:,} tokens: vLLM's API "
        "server tokenizes prompts one at a time, which the simulation leaves out; at the "
        f"{low}-{high} us per prompt token that cached bursts measured, the mean request waits "
        f"{wait[0] * 1e3:,.0f}-{wait[1] * 1e3:,.0f} ms at intake before the engine sees it, "
        f"which could add up to that to the predicted TTFT mean ({ttft_mean_seconds * 1e3:,.0f} "
        "ms)"
    )
