"""Regenerate the synthetic examples in data/: `.venv/bin/python data/make_examples.py`.

A deliberately simple synthetic server, not the simulator: per 15-second scrape interval it draws
arrivals (Poisson), runs decode steps at the roofline floor of llama-3.1-8b on one H100
(physics.roofline.decode_step) and one mixed step per arriving prompt (physics.roofline.mixed_step
with the prompt as the chunk), jitters every step time by a few percent (log-normal), and records
one ITL observation per running request per step, as vLLM V1 does. TTFT, e2e and the other
families follow from the same steps. Pages are written by metrics.exposition in vLLM's layout.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from itlkit.metrics.exposition import EngineState, render_vllm_metrics
from itlkit.metrics.histogram import Histogram, from_samples, sum_histograms
from itlkit.metrics.scrape_names import scrape_file_name
from itlkit.metrics.vllm_metrics import (
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS_SECONDS,
    REQUEST_LATENCY_BUCKETS_SECONDS,
    TTFT_BUCKETS_SECONDS,
)
from itlkit.physics.roofline import Deployment, decode_step, mixed_step

HERE = Path(__file__).parent
START = 1796212800.0  # 2026-12-02T12:00:00Z
PROMPT_TOKENS = 2048
OUTPUT_TOKENS = 1024
SCRAPE_SECONDS = 15.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEP = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")


def interval(rng, *, arrivals_per_second, running):
    """Observations of one scrape interval: ITL, TTFT, e2e samples and counters."""
    arrivals = rng.poisson(arrivals_per_second * SCRAPE_SECONDS)
    context = PROMPT_TOKENS + OUTPUT_TOKENS // 2
    decode = float(
        decode_step(DEP, batch_size=max(running, 1), context_tokens=context).step_seconds
    )
    mixed = float(
        mixed_step(
            DEP, batch_size=max(running, 1), context_tokens=context, chunk_tokens=PROMPT_TOKENS
        ).step_seconds
    )
    mixed_steps = min(arrivals, int(SCRAPE_SECONDS / mixed))
    decode_steps = max(int((SCRAPE_SECONDS - mixed_steps * mixed) / decode), 0)
    jitter = rng.lognormal(0.0, 0.05, size=(decode_steps + mixed_steps,))
    steps = np.concatenate([np.full(decode_steps, decode), np.full(mixed_steps, mixed)]) * jitter
    itl = np.repeat(steps, max(running, 1))
    ttft = mixed * (1 + rng.uniform(0, 1, size=mixed_steps)) + rng.exponential(0.01, mixed_steps)
    mean_itl = float(itl.mean()) if itl.size else decode
    e2e = ttft + (OUTPUT_TOKENS - 1) * mean_itl * rng.lognormal(0, 0.05, size=mixed_steps)
    tokens_per_step = np.concatenate(
        [np.full(decode_steps, running), np.full(mixed_steps, running + PROMPT_TOKENS)]
    )
    return dict(itl=itl, ttft=ttft, e2e=e2e, tokens=tokens_per_step, finished=mixed_steps,
                generated=int(itl.size), prompts=mixed_steps * PROMPT_TOKENS)  # fmt: skip


def empty(bounds) -> Histogram:
    return from_samples([], upper_bounds=bounds)


class Engine:
    """Cumulative state of one synthetic engine (a script-local helper, not library code)."""

    def __init__(self):
        self.hist = {
            "vllm:inter_token_latency_seconds": empty(ITL_BUCKETS_SECONDS),
            "vllm:time_to_first_token_seconds": empty(TTFT_BUCKETS_SECONDS),
            "vllm:e2e_request_latency_seconds": empty(REQUEST_LATENCY_BUCKETS_SECONDS),
            "vllm:iteration_tokens_total": empty(ITERATION_TOKENS_BUCKETS),
        }
        self.values = {"vllm:prompt_tokens_total": 0.0, "vllm:generation_tokens_total": 0.0,
                       "vllm:num_preemptions_total": 0.0}  # fmt: skip
        self.finished = 0.0

    def add(self, obs, *, running, waiting, kv_usage, preemptions):
        samples = {
            "vllm:inter_token_latency_seconds": (obs["itl"], ITL_BUCKETS_SECONDS),
            "vllm:time_to_first_token_seconds": (obs["ttft"], TTFT_BUCKETS_SECONDS),
            "vllm:e2e_request_latency_seconds": (obs["e2e"], REQUEST_LATENCY_BUCKETS_SECONDS),
            "vllm:iteration_tokens_total": (obs["tokens"], ITERATION_TOKENS_BUCKETS),
        }
        for name, (values, bounds) in samples.items():
            self.hist[name] = sum_histograms(
                [self.hist[name], from_samples(values, upper_bounds=bounds)]
            )
        self.values["vllm:prompt_tokens_total"] += obs["prompts"]
        self.values["vllm:generation_tokens_total"] += obs["generated"]
        self.values["vllm:num_preemptions_total"] += preemptions
        self.values["vllm:num_requests_running"] = running
        self.values["vllm:num_requests_waiting"] = waiting
        self.values["vllm:kv_cache_usage_perc"] = kv_usage
        self.finished += obs["finished"]

    def state(self) -> EngineState:
        reasons = {"stop": self.finished * 0.9, "length": self.finished * 0.1}
        return EngineState(dict(self.hist), dict(self.values), reasons)


def write_series(folder: Path, pages: list[str], *, step=SCRAPE_SECONDS):
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i, text in enumerate(pages):
        (folder / scrape_file_name(START + i * step)).write_text(text)


def burst_series(rng):
    """10 minutes, one engine, vLLM 0.11 page; arrivals double between minutes 4 and 6."""
    engine, pages = Engine(), []
    for i in range(41):
        minute = i * SCRAPE_SECONDS / 60
        burst = 4 <= minute < 6
        rate, running = (8.0, 128) if burst else (4.0, 64)
        if i > 0:
            obs = interval(rng, arrivals_per_second=rate, running=running)
            preempted = rng.poisson(2.0) if burst else 0
            engine.add(obs, running=running, waiting=12 if burst else 0,
                       kv_usage=running / 160, preemptions=preempted)  # fmt: skip
        pages.append(
            render_vllm_metrics(
                {"0": engine.state()}, model_name=MODEL, version="0.11", info_families=True
            )
        )
    write_series(HERE / "synthetic-v0.11-llama-3.1-8b-h100-burst", pages)


def restart_series(rng):
    """3 minutes, two engines (data parallel), vLLM 0.9 page, multiprocess label order; the
    server restarts before scrape 8 (every counter starts again from zero)."""
    engines, pages = {"0": Engine(), "1": Engine()}, []
    for i in range(13):
        if i == 8:
            engines = {"0": Engine(), "1": Engine()}
        for engine in engines.values():
            if i > 0 and i != 8:
                obs = interval(rng, arrivals_per_second=1.5, running=12)
                engine.add(obs, running=12, waiting=0, kv_usage=0.3, preemptions=rng.poisson(0.5))
        states = {k: e.state() for k, e in engines.items()}
        pages.append(
            render_vllm_metrics(
                states, model_name=MODEL, version="0.9", sorted_labels=True, info_families=True
            )
        )
    write_series(HERE / "synthetic-v0.9-two-engines-restart", pages)


def one_page(rng):
    """A single vLLM 0.12 page (ITL name only) after 5 minutes of steady load."""
    engine = Engine()
    for _ in range(20):
        engine.add(interval(rng, arrivals_per_second=3.0, running=9), running=9, waiting=0,
                   kv_usage=0.2, preemptions=0)  # fmt: skip
    text = render_vllm_metrics(
        {"0": engine.state()}, model_name=MODEL, version="0.12", info_families=True
    )
    (HERE / "synthetic-v0.12-one-page-20261202T120500Z.prom").write_text(text)


def bench_result(rng):
    """A `vllm bench serve --save-result --save-detailed` JSON: 64 requests of 48 output tokens."""
    ttfts, itls, errors = [], [], []
    for i in range(64):
        obs = interval(rng, arrivals_per_second=2.0, running=8)
        gaps = rng.choice(obs["itl"], size=47)
        ttfts.append(round(float(obs["ttft"][0]) if obs["ttft"].size else 0.05, 6))
        itls.append([round(float(g), 6) for g in gaps])
        errors.append("" if i != 13 else "Server disconnected")
    ttfts[13], itls[13] = 0.0, []
    doc = {
        "date": "20261202-120000",
        "backend": "vllm",
        "model_id": MODEL,
        "num_prompts": 64,
        "completed": 63,
        "input_lens": [PROMPT_TOKENS] * 64,
        "output_lens": [48] * 63 + [0],
        "ttfts": ttfts,
        "itls": itls,
        "errors": errors,
    }
    (HERE / "synthetic-vllm-bench-serve.json").write_text(json.dumps(doc))


if __name__ == "__main__":
    rng = np.random.default_rng(20261202)
    burst_series(rng)
    restart_series(rng)
    one_page(rng)
    bench_result(rng)
