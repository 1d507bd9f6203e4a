"""The API server's prompt intake: a serial queue in front of the engine.

vLLM's OpenAI server tokenizes the prompts it receives one at a time, on one worker thread
(`ThreadPoolExecutor(max_workers=1)` behind `_tokenize_prompt_input_async` in
vllm/entrypoints/openai/serving_engine.py, vllm-project/vllm @
7ded96b3c73f63400cdb048a73c34292ba862d99; vllm-project/vllm issue 19012: "we process each
request's tokenization sequentially"). A request reaches the engine once the prompts sent before
it and its own were taken in, so a burst's prompts arrive at the engine spread out by their
token counts, however fast the engine is. The client's clock (TTFT, E2E) still starts at the send.

The cost per prompt token is measured where the engine had nearly nothing to compute, between
bursts of one server whose prompts the prefix cache held: 8-15 us per prompt token ahead
(`calibration.intake`); `INTAKE_SECONDS_PER_PROMPT_TOKEN` is the middle of that range, which
calibrate's leave-one-out TTFT error favoured over 5 and 15 us (16.1% against 17.1 and 16.7%, on
the four files before LambdaLabs' runs; docs/research/the-engine-step-model.md).
"""

from __future__ import annotations

import numpy as np

INTAKE_SECONDS_PER_PROMPT_TOKEN = 10e-6


def intake_departures(arrival_seconds, prompt_tokens, seconds_per_token: float) -> np.ndarray:
    """When each request, taken in first come first served at `seconds_per_token` per prompt
    token, reaches the engine: d[i] = max(arrival[i], d[i - 1]) + cost[i], computed as
    S[i] + max over j <= i of (arrival[j] - S[j - 1]), S the running sum of the costs."""
    arrival = np.asarray(arrival_seconds, dtype=float)
    if not seconds_per_token:
        return arrival.copy()
    cost = seconds_per_token * np.asarray(prompt_tokens, dtype=float)
    done = np.cumsum(cost)
    return done + np.maximum.accumulate(arrival - (done - cost))
