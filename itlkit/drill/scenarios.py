"""The drill's scenarios: a random "TTFT is fine, ITL is bad" deployment and load, and its
worked numbers from `physics.roofline`.

The token budget is vLLM's `max_num_batched_tokens`, and it counts the decodes: vLLM V1's
`Scheduler.schedule` (vllm-project/vllm `vllm/v1/core/sched/scheduler.py`, commit 00024d31)
starts from `token_budget = max_num_scheduled_tokens` (= `max_num_batched_tokens`), schedules
the RUNNING requests first (a decode takes one token: `token_budget -= num_new_tokens`), then
gives a waiting prompt `min(num_new_tokens, token_budget)`, and asserts
`total_num_scheduled_tokens <= max_num_scheduled_tokens`. So a step carries the decodes and a
chunk of budget - decodes prompt tokens, and a prompt takes ceil(prompt / (budget - decodes))
steps to prefill: the rule `itlkit.sim` (`Engine`: budget - decoders) and `itlkit diagnose`
(max_num_batched_tokens - batch) use, and what `itlkit explain --chunk` is given.

SGLang is the other engine a scenario may run (`Scenario.engine`): its prefill batch runs alone
before the running batch decodes (`Scheduler.get_next_batch_to_run`, sgl-project/sglang @
0003215c; `itlkit.sim.sglang`), and its `--chunked-prefill-size` is the prompt tokens of that
batch alone. So a running stream waits out the whole batch and then its own decode step: the
number the drill asks for in place of vLLM's mixed step.

A vLLM scenario may run speculative decoding (`Scenario.speculation`: n-gram drafts, so the
draft itself is free): each running request then verifies k drafts a step and takes k + 1 of
the budget (`Scheduler.schedule` counts `num_tokens_with_spec`; docs/research/speculative-
decoding.md), and the step asked about is the verification step of batch x (k + 1) tokens,
posed only where the step model prices it past the batch where speculation stops paying.

For Llama 3.1 8B / H100 SXM / batch 64 / 4K / a 2,048-token chunk (a budget of 2,112) they are
the reference answer's 15.05 ms floor, 10.26 ms KV term and 79 ms mixed step
(`shared/spec/worked-example.txt`). Scenarios are drawn with an explicit
`numpy.random.Generator`, so a seed reproduces them, and only deployments that are valid for their
TP degree and fit in GPU memory are posed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    step_coefficients,
    step_time,
)
from itlkit.physics.speculative import Speculation, crossover_batch, speculative_step
from itlkit.physics.stall import prefill_alone_seconds, stall
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
BUDGET_CHOICES = (1024, 2048, 4096, 8192)  # max_num_batched_tokens (vLLM's default is 2,048-8,192)
PROMPT_BUDGETS = (2, 4)  # the prompt asked about is this many budgets long
SMALLER_BUDGET_DIVISOR = 4  # the "lower the token budget" fix: 4,096 -> 1,024
# A drawn scenario's decodes take at most this share of the smaller budget, so its chunks still
# carry the prompt forward (vLLM itself only needs max_num_batched_tokens >= max_num_seqs).
MAX_DECODE_SHARE = 0.5
OBSERVED_MBU = (0.55, 0.72)  # real servers stream HBM at 50-70% of the datasheet rate
HOST_P50_FACTOR = 2.5  # the host-overhead symptom's p50 sits this far above a normal one
MAX_DRAWS = 10_000
SGLANG_SHARE = 0.25  # of drawn scenarios, those served by SGLang (drawn last: a seed's first
# scenario is what it was before SGLang was asked about)
# Of the rest, those that run speculative decoding, read off the same draw (u in [0.25, 0.5):
# k = 2, 3, 4 by thirds) so that every other scenario of a seed stays what it was; posed only
# where speculation does not pay at the drawn batch, else the scenario stays plain vLLM.
SPECULATIVE_SHARE = 0.25
SPECULATIVE_ACCEPTANCE = (
    0.3  # per draft, geometric (n-gram drafts on chat): 1.39 to 1.43 tokens a step
)
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class Scenario:
    """One drill question: a deployment, its load, the token budget and the symptom.

    `budget_tokens` is vLLM's max_num_batched_tokens: the decodes and a prefill chunk together.
    """

    deployment: Deployment
    batch_size: int
    context_tokens: int
    budget_tokens: int
    prompt_tokens: int
    smaller_budget_tokens: int
    symptom: str
    observed_p50_seconds: float
    engine: str = "vllm"  # "sglang": prefill batches of budget_tokens run alone
    speculation: Speculation | None = None  # vLLM with n-gram drafts: k + 1 tokens a decode

    @property
    def decode_tokens(self) -> int:
        """Budget tokens the running requests take: one each, k + 1 with speculation."""
        width = 1 if self.speculation is None else self.speculation.k + 1
        return self.batch_size * width

    @property
    def chunk_tokens(self) -> int:
        """Prompt tokens a step carries beside the decodes at the budget (SGLang: alone)."""
        if self.engine == "sglang":
            return self.budget_tokens
        return chunk_beside_decodes(budget_tokens=self.budget_tokens, decodes=self.decode_tokens)

    @property
    def smaller_chunk_tokens(self) -> int:
        """... and at the smaller budget of the "lower the token budget" fix."""
        if self.engine == "sglang":
            return self.smaller_budget_tokens
        return chunk_beside_decodes(
            budget_tokens=self.smaller_budget_tokens, decodes=self.decode_tokens
        )

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
    # speculative scenarios: tokens a verification step emits, a token's time, the plain step
    # at this batch and the batch where speculation stops paying (None: it pays up to 4,096)
    tokens_per_step: float = 1.0
    per_token_seconds: float = float("nan")
    plain_step_seconds: float = float("nan")
    crossover_batch: int | None = None


def chunk_beside_decodes(*, budget_tokens: int, decodes: int) -> int:
    """Prefill tokens a step can carry: budget - decodes (vLLM V1 schedules running requests
    first; see the module docstring). ConfigError when the decodes leave no room."""
    chunk = int(budget_tokens) - int(decodes)
    if chunk <= 0:
        raise ConfigError(
            f"a token budget (max_num_batched_tokens) of {int(budget_tokens):,} is used up by "
            f"{int(decodes):,} decodes: no prefill chunk would ever run"
        )
    return chunk


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
    budget_tokens: int,
    prompt_tokens: int,
    smaller_budget_tokens: int | None = None,
    symptom: str = "bimodal",
    observed_mbu: float = 0.63,
    engine: str = "vllm",
    speculation: Speculation | None = None,
) -> Scenario:
    """A scenario from explicit settings (the smaller budget defaults to a quarter of the
    budget); raises ConfigError if it does not fit in memory or the decodes fill a budget."""
    if (speculation is not None) != (symptom == "speculation") or (
        speculation is not None and engine != "vllm"
    ):
        raise ConfigError("the speculation symptom goes with a vLLM scenario that speculates")
    width = 1 if speculation is None else speculation.k + 1
    smaller = (
        max(int(budget_tokens) // SMALLER_BUDGET_DIVISOR, 1)
        if smaller_budget_tokens is None
        else int(smaller_budget_tokens)
    )
    if engine not in ENGINE_NAMES:
        raise ConfigError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINE_NAMES)}")
    for budget in (budget_tokens, smaller) if engine == "vllm" else ():
        chunk_beside_decodes(budget_tokens=budget, decodes=batch_size * width)
    if symptom not in SYMPTOMS:
        raise ConfigError(f"unknown symptom {symptom!r}; valid symptoms: {', '.join(SYMPTOMS)}")
    cap = capacity(deployment, context_tokens=context_tokens)
    if not cap.fits(batch_size=int(batch_size)):
        raise ConfigError(f"{deployment.label}: {cap.explain(batch_size=int(batch_size))}")
    floor = float(
        decode_step(deployment, batch_size=batch_size, context_tokens=context_tokens).floor_seconds
    )
    p50 = floor / observed_mbu * (HOST_P50_FACTOR if symptom == "host" else 1.0)
    if speculation is not None:  # the verification step, as slow against its model
        p50 = float(speculative_step(deployment, batch_size=batch_size,
                                     context_tokens=context_tokens, spec=speculation)
                    .verify_seconds) / observed_mbu  # fmt: skip
    return Scenario(
        deployment=deployment,
        batch_size=int(batch_size),
        context_tokens=int(context_tokens),
        budget_tokens=int(budget_tokens),
        prompt_tokens=int(prompt_tokens),
        smaller_budget_tokens=smaller,
        symptom=symptom,
        observed_p50_seconds=round(p50 / MILLISECOND, 1) * MILLISECOND,
        engine=engine,
        speculation=speculation,
    )


def worked_example() -> Scenario:
    """The reference interview answer: Llama 3.1 8B BF16 on one H100 SXM, 64 x 4K, 2,048 chunk.

    Its chunks of 2,048 and 512 tokens ride beside 64 decodes, so in vLLM's terms the budgets are
    2,112 and 576 tokens: the reference's 79 ms and 29 ms steps, 2 and 8 steps for 4,096 tokens.
    """
    return make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=64,
        context_tokens=4096,
        budget_tokens=2048 + 64,
        prompt_tokens=4096,
        smaller_budget_tokens=512 + 64,
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
        budget = int(rng.choice(BUDGET_CHOICES))
        prompt = budget * int(rng.choice(PROMPT_BUDGETS))
        symptom = str(rng.choice(symptoms, p=weights / weights.sum()))
        observed = float(rng.uniform(*OBSERVED_MBU))
        if batch > MAX_DECODE_SHARE * (budget // SMALLER_BUDGET_DIVISOR):
            continue
        for tp in TP_CHOICES:
            try:
                dep = drill_deployment(
                    model=model,
                    gpu=gpu,
                    weight_precision=weight_precision,
                    kv_precision=kv_precision,
                    tp=tp,
                )
                scenario = make_scenario(
                    dep,
                    batch_size=batch,
                    context_tokens=context,
                    budget_tokens=budget,
                    prompt_tokens=prompt,
                    symptom=symptom,
                    observed_mbu=observed,
                )
            except ConfigError:
                continue
            u = rng.random()
            if u < SGLANG_SHARE:
                return replace(scenario, engine="sglang")
            return _speculative(scenario, u, observed) or scenario
    raise RuntimeError(f"no valid scenario in {MAX_DRAWS} draws")  # pragma: no cover


def _speculative(s: Scenario, u: float, observed_mbu: float) -> Scenario | None:
    """The scenario with n-gram speculation, where the draw `u` asks for it, the budgets hold
    its drafts, and it does not pay at the scenario's batch; else None."""
    share = (u - SGLANG_SHARE) / SPECULATIVE_SHARE
    if not 0 <= share < 1:
        return None
    spec = Speculation(2 + int(share * 3), SPECULATIVE_ACCEPTANCE)
    step = speculative_step(s.deployment, batch_size=s.batch_size,
                            context_tokens=s.context_tokens, spec=spec)  # fmt: skip
    if float(step.speedup) >= 1:
        return None
    try:
        return make_scenario(
            s.deployment, batch_size=s.batch_size, context_tokens=s.context_tokens,
            budget_tokens=s.budget_tokens, prompt_tokens=s.prompt_tokens,
            smaller_budget_tokens=s.smaller_budget_tokens, symptom="speculation",
            observed_mbu=observed_mbu,
            speculation=spec,
        )  # fmt: skip
    except ConfigError:
        return None


def _verification(s: Scenario, w: dict) -> dict:
    """The worked numbers of a speculative scenario's verification step (n-gram: no draft)."""
    dep, spec = s.deployment, s.speculation
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    verify = step_time(dep, chunk_tokens=s.batch_size * spec.k, **load)
    priced = speculative_step(dep, spec=spec, **load)
    smaller = step_time(dep, chunk_tokens=s.batch_size * spec.k + s.smaller_chunk_tokens, **load)
    return dict(
        w,
        mixed_tokens=int(verify.tokens),
        mixed_matmul_flops=float(verify.matmul_flops),
        mixed_matmul_seconds=float(verify.matmul_seconds),
        mixed_step_seconds=float(verify.step_seconds),
        mixed_compute_bound=bool(verify.compute_bound),
        over_floor=float(verify.step_seconds) / w["floor_seconds"],
        smaller_mixed_step_seconds=float(smaller.step_seconds),
        tokens_per_step=spec.tokens_per_step,
        per_token_seconds=float(priced.per_token_seconds),
        plain_step_seconds=float(priced.plain_step_seconds),
        crossover_batch=crossover_batch(dep, context_tokens=s.context_tokens, spec=spec),
    )


def _prefill_alone(dep: Deployment, chunk: int) -> dict:
    """A prefill batch of `chunk` tokens with no decodes beside it (SGLang's default)."""
    c = step_coefficients(dep)
    return dict(
        tokens=chunk,
        matmul_flops=float(c.matmul_flops(chunk, 1)),
        matmul_seconds=float(c.matmul_seconds(chunk, 1)),
        compute_bound=bool(c.matmul_seconds(chunk, 1) > c.weight_read(chunk)),
        seconds=prefill_alone_seconds(dep, chunk_tokens=chunk),
    )


def worked_numbers(scenario: Scenario) -> Worked:
    """Floor, its two terms, the step that fills the budget (decodes + chunk) and the prefill
    steps at both budgets, from the roofline. For SGLang the step asked about is a running
    stream's wait: the prefill batch alone, then its decode step."""
    s, dep = scenario, scenario.deployment
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    decode = decode_step(dep, **load)
    at_chunk = prefill_cost(dep, prompt_tokens=s.prompt_tokens, chunk_tokens=s.chunk_tokens)
    at_smaller = prefill_cost(
        dep, prompt_tokens=s.prompt_tokens, chunk_tokens=s.smaller_chunk_tokens
    )
    floor = float(decode.floor_seconds)
    if s.engine == "sglang":  # a stream's wait: the batch alone, then its decode step
        waits = [stall(dep, policy="sglang", chunk_tokens=chunk, **load).gap_seconds
                 for chunk in (s.chunk_tokens, s.smaller_chunk_tokens)]  # fmt: skip
        mixed = dict(_prefill_alone(dep, s.chunk_tokens), seconds=waits[0])
        smaller = waits[1]
    else:
        step = mixed_step(dep, chunk_tokens=s.chunk_tokens, **load)
        mixed = dict(tokens=int(step.tokens), matmul_flops=float(step.matmul_flops),
                     matmul_seconds=float(step.matmul_seconds),
                     compute_bound=bool(step.compute_bound),
                     seconds=float(step.step_seconds))  # fmt: skip
        smaller = float(mixed_step(dep, chunk_tokens=s.smaller_chunk_tokens, **load).step_seconds)
    fields = dict(
        weight_bytes=float(decode.weight_bytes),
        kv_bytes_per_token=float(dep.kv_bytes_per_token_per_gpu),
        kv_bytes=float(decode.kv_bytes),
        weight_read_seconds=float(decode.weight_read_seconds),
        kv_read_seconds=float(decode.kv_read_seconds),
        floor_seconds=floor,
        mixed_tokens=int(mixed["tokens"]),
        mixed_matmul_flops=mixed["matmul_flops"],
        mixed_matmul_seconds=mixed["matmul_seconds"],
        mixed_step_seconds=mixed["seconds"],
        mixed_compute_bound=mixed["compute_bound"],
        over_floor=mixed["seconds"] / floor,
        ridge_flops_per_byte=dep.ridge_flops_per_byte,
        ridge_tokens_per_step=ridge_tokens_per_step(dep),
        smaller_mixed_step_seconds=smaller,
        prefill_steps=at_chunk.steps,
        smaller_prefill_steps=at_smaller.steps,
        observed_mbu=float(mbu(floor_seconds=floor, measured_seconds=s.observed_p50_seconds)),
    )
    return Worked(**(fields if s.speculation is None else _verification(s, fields)))


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
        _load_text(s),
        f"Assume GEMMs run at {MFU:.0%} of peak once compute-bound; ignore all-reduce and host "
        "time.",
        "Symptom: " + SYMPTOMS[s.symptom].text.format(p50=format_seconds(s.observed_p50_seconds)),
        "Your turn: the decode floor, its KV term and "
        + (
            "how long a running stream waits across one full prefill batch (the batch, then its "
            "own decode step)"
            if s.engine == "sglang"
            else f"the time of one verification step at this load ({s.batch_size} sequences x "
            f"{s.speculation.k + 1} tokens; no prompt in it)"
            if s.speculation is not None
            else "the time of a step that fills the token budget with a prefill chunk"
        )
        + " (ms); the causes ranked; what ITL p99 describes; the signal you would read; the "
        f"fix; and how many chunked steps a prompt of {s.prompt_tokens:,} tokens needs at a "
        f"budget of {s.smaller_budget_tokens:,} tokens per step.",
    )


def _load_text(s: Scenario) -> str:
    """The load and the engine's schedule, in that engine's terms."""
    running = (
        f"Load: {s.batch_size} running sequences at a mean context of {s.context_tokens:,} "
        f"tokens; typical prompts are {s.prompt_tokens:,} tokens. "
    )
    if s.engine == "sglang":
        return running + (
            f"The server is SGLang with its defaults: a prefill batch of up to "
            f"{s.budget_tokens:,} prompt tokens (--chunked-prefill-size) runs alone, before the "
            "running requests take their next decode step (--enable-mixed-chunk is off)."
        )
    if s.speculation is not None:
        spec = s.speculation
        return running + (
            f"The server is vLLM with n-gram speculative decoding: {spec.k} draft tokens a step "
            f"(num_speculative_tokens), each accepted with probability {spec.acceptance:g} if "
            f"the one before it was, so a step emits {spec.tokens_per_step:.2f} tokens on "
            f"average; drafting costs nothing on the GPU. Chunked prefill with a token budget "
            f"(max_num_batched_tokens) of {s.budget_tokens:,} tokens per step: each decode takes "
            f"{spec.k + 1} of it, the chunk the rest."
        )
    return running + (
        f"The server is vLLM: chunked prefill with a token budget (max_num_batched_tokens) of "
        f"{s.budget_tokens:,} tokens per step, decodes and chunk together."
    )
