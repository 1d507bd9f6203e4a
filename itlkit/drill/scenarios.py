"""The drill's scenarios: a random "TTFT is fine, ITL is bad" deployment and load, and its
worked numbers from `physics.roofline`.

For Llama 3.1 8B / H100 SXM / batch 64 / 4K / 2,048-token chunk they are the reference answer's
15.05 ms floor, 10.26 ms KV term and 79 ms mixed step (`shared/spec/worked-example.txt`).
Scenarios are drawn with an explicit `numpy.random.Generator`, so a seed reproduces them, and
only deployments that are valid for their TP degree and fit in GPU memory are posed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itlkit.drill.content import SYMPTOM_WEIGHTS, SYMPTOMS
from itlkit.errors import ConfigError
from itlkit.physics.roofline import (
    Deployment,
    capacity,
    decode_step,
    mbu,
    mixed_step,
    prefill_cost,
    ridge_tokens_per_step,
)
from itlkit.units import (
    MILLISECOND,
    format_bandwidth,
    format_rate,
    format_seconds,
)

MFU = 0.5  # the reference answer's assumption for compute-bound GEMMs
# What a scenario may be drawn from. Dense models without sliding windows, so the floor is exactly
# weights + KV; GPUs with enough memory to serve them at some TP.
DRILL_MODELS = (
    "llama-3.1-8b",
    "llama-3.2-3b",
    "mistral-7b-v0.3",
    "qwen2.5-7b",
    "qwen3-8b",
    "qwen2.5-32b",
    "qwen3-32b",
    "llama-3.1-70b",
    "qwen2.5-72b",
)
DRILL_GPUS = ("h100-sxm", "h200-sxm", "a100-80gb-sxm", "b200", "mi300x", "l40s")
TP_CHOICES = (1, 2, 4, 8)
BATCH_CHOICES = (8, 16, 32, 48, 64, 96, 128, 192, 256)
CONTEXT_CHOICES = (1024, 2048, 4096, 8192, 16384, 32768)
CHUNK_CHOICES = (1024, 2048, 4096, 8192)
PROMPT_CHUNKS = (2, 4)  # the prompt asked about is this many chunks long
SMALLER_BUDGET_DIVISOR = 4  # the "lower the token budget" fix: 2,048 -> 512
OBSERVED_MBU = (0.55, 0.72)  # real servers stream HBM at 50-70% of the datasheet rate
HOST_P50_FACTOR = 2.5  # the host-overhead symptom's p50 sits this far above a normal one
MAX_DRAWS = 10_000


@dataclass(frozen=True)
class Scenario:
    """One drill question: a deployment, its load, the chunk budget and the symptom."""

    deployment: Deployment
    batch_size: int
    context_tokens: int
    chunk_tokens: int
    prompt_tokens: int
    smaller_chunk_tokens: int
    symptom: str
    observed_p50_seconds: float

    @property
    def expected_ranking(self) -> tuple[str, ...]:
        return SYMPTOMS[self.symptom].ranking

    @property
    def top_cause(self) -> str:
        return self.expected_ranking[0]


@dataclass(frozen=True)
class Worked:
    """The reference numbers of a scenario (SI units, per GPU)."""

    weight_bytes: float
    kv_bytes_per_token: float
    kv_bytes: float
    weight_read_seconds: float
    kv_read_seconds: float
    floor_seconds: float
    mixed_tokens: int
    mixed_matmul_flops: float
    mixed_matmul_seconds: float
    mixed_step_seconds: float
    mixed_compute_bound: bool
    over_floor: float
    ridge_flops_per_byte: float
    ridge_tokens_per_step: float
    smaller_mixed_step_seconds: float
    prefill_steps: int
    smaller_prefill_steps: int
    observed_mbu: float


def drill_deployment(
    *, model: str, gpu: str, weight_precision: str = "bf16", kv_precision: str = "bf16", tp: int = 1
) -> Deployment:
    """The drill's deployment: the reference answer's terms (50% MFU, no all-reduce, no host)."""
    return Deployment.create(
        model=model,
        gpu=gpu,
        weight_precision=weight_precision,
        kv_precision=kv_precision,
        tp=tp,
        mfu=MFU,
        allreduce=False,
    )


def make_scenario(
    deployment: Deployment,
    *,
    batch_size: int,
    context_tokens: int,
    chunk_tokens: int,
    prompt_tokens: int,
    symptom: str = "bimodal",
    observed_mbu: float = 0.63,
) -> Scenario:
    """A scenario from explicit settings; raises ConfigError if it does not fit in memory."""
    if symptom not in SYMPTOMS:
        raise ConfigError(f"unknown symptom {symptom!r}; valid symptoms: {', '.join(SYMPTOMS)}")
    cap = capacity(deployment, context_tokens=context_tokens)
    if not cap.fits(batch_size=int(batch_size)):
        raise ConfigError(f"{deployment.label}: {cap.explain(batch_size=int(batch_size))}")
    floor = float(
        decode_step(deployment, batch_size=batch_size, context_tokens=context_tokens).floor_seconds
    )
    p50 = floor / observed_mbu * (HOST_P50_FACTOR if symptom == "host" else 1.0)
    return Scenario(
        deployment=deployment,
        batch_size=int(batch_size),
        context_tokens=int(context_tokens),
        chunk_tokens=int(chunk_tokens),
        prompt_tokens=int(prompt_tokens),
        smaller_chunk_tokens=max(int(chunk_tokens) // SMALLER_BUDGET_DIVISOR, 1),
        symptom=symptom,
        observed_p50_seconds=round(p50 / MILLISECOND, 1) * MILLISECOND,
    )


def worked_example() -> Scenario:
    """The reference interview answer: Llama 3.1 8B BF16 on one H100 SXM, 64 x 4K, 2,048 chunk."""
    return make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=64,
        context_tokens=4096,
        chunk_tokens=2048,
        prompt_tokens=4096,
        symptom="bimodal",
        observed_mbu=0.627,  # the reference's "measured 24 ms p50"
    )


def draw_scenario(rng: np.random.Generator) -> Scenario:
    """A random valid scenario: the smallest TP that fits the weights and the batch's KV."""
    symptoms = list(SYMPTOM_WEIGHTS)
    weights = np.array([SYMPTOM_WEIGHTS[s] for s in symptoms])
    for _ in range(MAX_DRAWS):
        model = str(rng.choice(DRILL_MODELS))
        gpu = str(rng.choice(DRILL_GPUS))
        weight_precision = str(rng.choice(["bf16", "fp8"], p=[0.7, 0.3]))
        kv_precision = str(rng.choice(["bf16", "fp8"], p=[0.6, 0.4]))
        batch = int(rng.choice(BATCH_CHOICES))
        context = int(rng.choice(CONTEXT_CHOICES))
        chunk = int(rng.choice(CHUNK_CHOICES))
        prompt = chunk * int(rng.choice(PROMPT_CHUNKS))
        symptom = str(rng.choice(symptoms, p=weights / weights.sum()))
        observed = float(rng.uniform(*OBSERVED_MBU))
        for tp in TP_CHOICES:
            try:
                dep = drill_deployment(
                    model=model,
                    gpu=gpu,
                    weight_precision=weight_precision,
                    kv_precision=kv_precision,
                    tp=tp,
                )
                return make_scenario(
                    dep,
                    batch_size=batch,
                    context_tokens=context,
                    chunk_tokens=chunk,
                    prompt_tokens=prompt,
                    symptom=symptom,
                    observed_mbu=observed,
                )
            except ConfigError:
                continue
    raise RuntimeError(f"no valid scenario in {MAX_DRAWS} draws")  # pragma: no cover


def worked_numbers(scenario: Scenario) -> Worked:
    """Floor, its two terms, the step with a chunk and the prefill steps, from the roofline."""
    s, dep = scenario, scenario.deployment
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    decode = decode_step(dep, **load)
    mixed = mixed_step(dep, chunk_tokens=s.chunk_tokens, **load)
    smaller = mixed_step(dep, chunk_tokens=s.smaller_chunk_tokens, **load)
    at_chunk = prefill_cost(dep, prompt_tokens=s.prompt_tokens, chunk_tokens=s.chunk_tokens)
    at_smaller = prefill_cost(
        dep, prompt_tokens=s.prompt_tokens, chunk_tokens=s.smaller_chunk_tokens
    )
    floor = float(decode.floor_seconds)
    return Worked(
        weight_bytes=float(decode.weight_bytes),
        kv_bytes_per_token=float(dep.kv_bytes_per_token_per_gpu),
        kv_bytes=float(decode.kv_bytes),
        weight_read_seconds=float(decode.weight_read_seconds),
        kv_read_seconds=float(decode.kv_read_seconds),
        floor_seconds=floor,
        mixed_tokens=int(mixed.tokens),
        mixed_matmul_flops=float(mixed.matmul_flops),
        mixed_matmul_seconds=float(mixed.matmul_seconds),
        mixed_step_seconds=float(mixed.step_seconds),
        mixed_compute_bound=bool(mixed.compute_bound),
        over_floor=float(mixed.over_floor),
        ridge_flops_per_byte=dep.ridge_flops_per_byte,
        ridge_tokens_per_step=ridge_tokens_per_step(dep),
        smaller_mixed_step_seconds=float(smaller.step_seconds),
        prefill_steps=at_chunk.steps,
        smaller_prefill_steps=at_smaller.steps,
        observed_mbu=float(mbu(floor_seconds=floor, measured_seconds=s.observed_p50_seconds)),
    )


def question_text(scenario: Scenario) -> tuple[str, ...]:
    """The question as paragraphs: the deployment's facts, the load, the symptom, the tasks."""
    s, dep, m = scenario, scenario.deployment, scenario.deployment.model
    gpu = dep.gpu
    where = (
        f"{dep.tp} x {gpu.name} (TP={dep.tp}; give per-GPU numbers)"
        if dep.tp > 1
        else (f"one {gpu.name}")
    )
    params = m.streamed_params(tokens=1, exclude_input_embedding=False)
    return (
        f"Deployment: {m.slug} ({params / 1e9:.2f} B parameters streamed per step, {m.num_layers} "
        f"layers, {m.num_kv_heads} KV heads of dimension {m.attention_head_dim}), weights in "
        f"{dep.weights.name.upper()} ({dep.weights.bytes_per_element:g} B), KV cache in "
        f"{dep.kv.name.upper()} ({dep.kv.bytes_per_element:g} B), on {where}: "
        f"{format_bandwidth(gpu.hbm_bytes_per_second)} HBM, "
        f"{format_rate(dep.peak_flops_per_second)} dense {dep.compute_precision.upper()}.",
        f"Load: {s.batch_size} running sequences at a mean context of {s.context_tokens:,} "
        f"tokens; chunked prefill with a budget of {s.chunk_tokens:,} tokens per step; typical "
        f"prompts are {s.prompt_tokens:,} tokens. Assume GEMMs run at {MFU:.0%} of peak once "
        "compute-bound; ignore all-reduce and host time.",
        "Symptom: " + SYMPTOMS[s.symptom].text.format(p50=format_seconds(s.observed_p50_seconds)),
        "Your turn: the decode floor, its KV term and the time of a step that carries a full "
        "chunk (ms); the four causes ranked; what ITL p99 describes; the signal you would read; "
        f"the fix; and how many chunked steps a prompt of {s.prompt_tokens:,} tokens needs at a "
        f"budget of {s.smaller_chunk_tokens:,} tokens per step.",
    )
