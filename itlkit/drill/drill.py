"""The interview drill: a random "TTFT is fine, ITL is bad" scenario, its worked numbers, and
the grading of a user's answer (numbers, ranked causes, signal, fix), the classic mistakes spotted
in what they entered, a Weak / Hire / Strong Hire rubric, and the follow-up questions.

Every worked number comes from `physics.roofline`; for Llama 3.1 8B / H100 SXM / batch 64 / 4K /
2,048-token chunk they are the reference answer's 15.05 ms floor, 10.26 ms KV term and 79 ms
mixed step (`shared/spec/worked-example.txt`). Scenarios are drawn with an explicit
`numpy.random.Generator`, so a seed reproduces them, and only deployments that are valid for their
TP degree and fit in GPU memory are posed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from itlkit.diagnosis.scoring import CAUSES, TITLES
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
    format_bytes,
    format_percent,
    format_rate,
    format_seconds,
)

CORRECT_WITHIN = 0.05  # relative error of a number graded correct
CLOSE_WITHIN = 0.20  # ... and graded close
MFU = 0.5  # the reference answer's assumption for compute-bound GEMMs

CORRECT, CLOSE, WRONG, MISSING = "correct", "close", "wrong", "not answered"
WEAK, HIRE, STRONG_HIRE = "Weak", "Hire", "Strong Hire"
LEVELS = (WEAK, HIRE, STRONG_HIRE)

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


# ---- the menus the user picks from ------------------------------------------------------------
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
}
SYMPTOM_WEIGHTS = {"bimodal": 0.55, "shift": 0.15, "host": 0.15, "gaps": 0.15}

P99_CHOICES = {
    "slowest_request": "the slowest 1% of requests: a few unlucky users",
    "slow_steps": "the slowest 1% of token gaps: the engine steps that carried extra work",
    "mean_plus_sigma": "about the mean plus two standard deviations",
}
P99_RIGHT = "slow_steps"

SIGNALS = {
    "itl_buckets_vs_arrivals": (
        "ITL histogram buckets (slow share) against the arrival rate "
        "(rate of vllm:time_to_first_token_seconds_count)"
    ),
    "p50_vs_running": "how ITL p50 moves with the running requests and their context",
    "nsight_gaps": "an Nsight Systems trace: idle gaps between kernels",
    "preemptions": "rate of vllm:num_preemptions_total and KV-cache usage",
    "gpu_utilisation": "GPU utilisation (nvidia-smi / DCGM)",
    "mean_itl": "mean ITL over the last hour",
}
SIGNAL_FOR_CAUSE = {
    "prefill_interference": "itl_buckets_vs_arrivals",
    "batch_or_context_growth": "p50_vs_running",
    "host_overhead": "nsight_gaps",
    "preemption": "preemptions",
}

FIXES = {
    "lower_budget": "shrink max_num_batched_tokens (tokens per engine step)",
    "disaggregate": "disaggregate prefill from decode",
    "cap_or_fp8_kv": "cap max_num_seqs or quantise the KV cache to FP8",
    "add_replicas": "add GPUs / replicas",
    "cuda_graphs": "CUDA graphs on; sampling and detokenising no longer block the next step",
    "chunked_off": "turn chunked prefill off",
}
FIXES_FOR_CAUSE = {
    "prefill_interference": ("lower_budget", "disaggregate"),
    "batch_or_context_growth": ("cap_or_fp8_kv", "add_replicas"),
    "host_overhead": ("cuda_graphs",),
    "preemption": ("cap_or_fp8_kv", "add_replicas"),
}

MISTAKES = {
    "floor_from_weights_alone": "floor from the weights alone",
    "p99_as_slowest_request": "p99 read as the slowest request",
    "budget_without_ttft_check": "token budget lowered without checking TTFT p99",
    "gpu_utilisation": "GPU utilisation as the signal",
}


# ---- scenario and its worked numbers ----------------------------------------------------------
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


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


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
        f"Deployment: {m.slug} ({params / 1e9:.2f} B parameters streamed per step, "
        f"{m.num_layers} layers, {m.num_kv_heads} KV heads of dimension {m.attention_head_dim}), "
        f"weights in {dep.weights.name.upper()} ({dep.weights.bytes_per_element:g} B), KV cache in "
        f"{dep.kv.name.upper()} ({dep.kv.bytes_per_element:g} B), on {where}: "
        f"{format_bandwidth(gpu.hbm_bytes_per_second)} HBM, "
        f"{format_rate(dep.peak_flops_per_second)} dense {dep.compute_precision.upper()}.",
        f"Load: {s.batch_size} running sequences at a mean context of {s.context_tokens:,} "
        f"tokens; chunked prefill with a budget of {s.chunk_tokens:,} tokens per step; typical "
        f"prompts are {s.prompt_tokens:,} tokens. Assume GEMMs run at {MFU:.0%} of peak once "
        "compute-bound; ignore all-reduce and host time.",
        "Symptom: " + SYMPTOMS[s.symptom].text.format(p50=_ms(s.observed_p50_seconds)),
        "Your turn: the decode floor, its KV term and the time of a step that carries a full "
        f"chunk (ms); the four causes ranked; what ITL p99 describes; the signal you would read; "
        f"the fix; and how many chunked steps a prompt of {s.prompt_tokens:,} tokens needs at a "
        f"budget of {s.smaller_chunk_tokens:,} tokens per step.",
    )


# ---- the user's answer and its grade ----------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """What the user entered; None (or an empty ranking) means not answered. Seconds, SI."""

    floor_seconds: float | None = None
    kv_read_seconds: float | None = None
    mixed_step_seconds: float | None = None
    ranking: tuple[str | None, ...] = ()
    p99_meaning: str | None = None
    signal: str | None = None
    fix: str | None = None
    checked_ttft: bool = False
    prefill_steps: int | None = None


@dataclass(frozen=True)
class ItemGrade:
    """One graded item: the verdict, the numbers behind it, and a sentence of feedback."""

    key: str
    verdict: str
    answer: float | str | tuple | None
    worked: float | str | tuple | None
    relative_error: float | None
    feedback: str

    @property
    def ok(self) -> bool:
        """Correct or close: good enough to count towards the rubric."""
        return self.verdict in (CORRECT, CLOSE)


@dataclass(frozen=True)
class Mistake:
    """A classic mistake found in the user's own inputs."""

    key: str
    title: str
    detail: str


@dataclass(frozen=True)
class Rubric:
    """The level reached, why, and what the next level needs."""

    level: str
    met: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True)
class Grade:
    """The whole verdict on one answer."""

    scenario: Scenario
    worked: Worked
    items: tuple[ItemGrade, ...]
    mistakes: tuple[Mistake, ...]
    rubric: Rubric
    sanity: str

    def item(self, key: str) -> ItemGrade:
        return next(i for i in self.items if i.key == key)


def relative_error(*, answer: float, worked: float) -> float:
    """|answer - worked| / worked."""
    return abs(answer - worked) / abs(worked)


def verdict_for(*, answer: float | None, worked: float) -> tuple[str, float | None]:
    """correct within CORRECT_WITHIN, close within CLOSE_WITHIN, else wrong."""
    if answer is None or not math.isfinite(answer) or answer <= 0:
        return MISSING, None
    error = relative_error(answer=answer, worked=worked)
    if error <= CORRECT_WITHIN:
        return CORRECT, error
    if error <= CLOSE_WITHIN:
        return CLOSE, error
    return WRONG, error


def _number_item(key: str, answer: float | None, worked: float, how: str) -> ItemGrade:
    verdict, error = verdict_for(answer=answer, worked=worked)
    if verdict == MISSING:
        said = "You left this blank"
    else:
        off = f"{error:.0%} off" if error >= 0.005 else "spot on"
        said = f"You said {_ms(answer)} ({verdict}, {off})"
    return ItemGrade(key, verdict, answer, worked, error, f"{said}; worked: {how}.")


def _grade_floor(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    bw = format_bandwidth(scenario.deployment.gpu.hbm_bytes_per_second)
    how = (
        f"({format_bytes(w.weight_bytes)} of weights + {format_bytes(w.kv_bytes)} of KV) / "
        f"{bw} = {_ms(w.floor_seconds)}"
    )
    return _number_item("floor", answer.floor_seconds, w.floor_seconds, how)


def _grade_kv(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    s = scenario
    how = (
        f"{s.batch_size} sequences x {s.context_tokens:,} tokens x {w.kv_bytes_per_token:,.0f} B "
        f"= {format_bytes(w.kv_bytes)}, read in {_ms(w.kv_read_seconds)}"
    )
    return _number_item("kv_term", answer.kv_read_seconds, w.kv_read_seconds, how)


def _grade_mixed(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    dep = scenario.deployment
    bound = (
        "compute-bound: past the ridge"
        if w.mixed_compute_bound
        else "still memory-bound: short of the ridge"
    )
    how = (
        f"{w.mixed_tokens:,} tokens through the GEMMs ({bound}, which "
        f"{w.ridge_flops_per_byte:.0f} FLOP/B puts at about {w.ridge_tokens_per_step:.0f} tokens "
        "per step) take "
        f"{w.mixed_matmul_flops / 1e12:.1f} TFLOP at {format_rate(MFU * dep.peak_flops_per_second)}"
        f" = {_ms(w.mixed_matmul_seconds)}, plus the {_ms(w.kv_read_seconds)} KV read: "
        f"{_ms(w.mixed_step_seconds)}, {w.over_floor:.1f}x the floor"
    )
    return _number_item("mixed_step", answer.mixed_step_seconds, w.mixed_step_seconds, how)


def _grade_prefill_steps(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    s = scenario
    how = (
        f"ceil({s.prompt_tokens:,} / {s.smaller_chunk_tokens:,}) = {w.smaller_prefill_steps} "
        f"steps instead of {w.prefill_steps} at {s.chunk_tokens:,}: the TTFT price of the "
        f"smaller budget, whose slow step drops from {_ms(w.mixed_step_seconds)} to "
        f"{_ms(w.smaller_mixed_step_seconds)}"
    )
    steps = answer.prefill_steps
    if steps is None or steps <= 0:
        return ItemGrade(
            "prefill_steps",
            MISSING,
            None,
            w.smaller_prefill_steps,
            None,
            f"You left this blank; worked: {how}.",
        )
    gap = abs(int(steps) - w.smaller_prefill_steps)
    verdict = CORRECT if gap == 0 else CLOSE if gap == 1 else WRONG
    return ItemGrade(
        "prefill_steps",
        verdict,
        int(steps),
        w.smaller_prefill_steps,
        gap / w.smaller_prefill_steps,
        f"You said {int(steps)} ({verdict}); worked: {how}.",
    )


def grade_ranking(scenario: Scenario, ranking: tuple[str | None, ...]) -> ItemGrade:
    """Correct when the top two causes match the symptom's ranking, close when the top one does."""
    expected = scenario.expected_ranking
    shown = " > ".join(TITLES[c] for c in expected)
    picked = tuple(ranking) + (None,) * (len(CAUSES) - len(ranking))
    filled = [c for c in picked if c is not None]
    if not filled:
        return ItemGrade(
            "ranking",
            MISSING,
            (),
            expected,
            None,
            f"You left the ranking blank; for this symptom: {shown}.",
        )
    unknown = sorted(set(filled) - set(CAUSES))
    if unknown:
        raise ConfigError(f"unknown causes {unknown}; valid causes: {', '.join(CAUSES)}")
    problem = ""
    if len(set(filled)) != len(filled):
        problem = "each cause belongs in exactly one place (you used one twice)"
    elif picked[0] is None:
        problem = "rank 1 is blank: the first cause is the one that matters most"
    if problem:
        return ItemGrade(
            "ranking",
            WRONG,
            picked,
            expected,
            None,
            f"Ranking wrong: {problem}. For this symptom: {shown}.",
        )
    if picked[:2] == expected[:2]:
        verdict, why = CORRECT, "the two causes that matter are in the right order"
    elif picked[0] == expected[0]:
        verdict, why = CLOSE, f"right first cause, but second is {TITLES[expected[1]]}"
    else:
        verdict = WRONG
        why = f"the symptom points at {TITLES[expected[0]]} first, not {TITLES[picked[0]]}"
    return ItemGrade(
        "ranking",
        verdict,
        picked,
        expected,
        None,
        f"Ranking {verdict}: {why}. For this symptom: {shown}.",
    )


def _grade_choice(key: str, picked: str | None, right: str, menu: dict, why: str) -> ItemGrade:
    if picked is None:
        return ItemGrade(
            key,
            MISSING,
            None,
            right,
            None,
            f"You left this blank; the answer: {menu[right]}. {why}",
        )
    verdict = CORRECT if picked == right else WRONG
    return ItemGrade(
        key,
        verdict,
        picked,
        right,
        None,
        f"You chose {menu[picked]} ({verdict}); the answer: {menu[right]}. {why}",
    )


def _grade_fix(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    fits = FIXES_FOR_CAUSE[scenario.top_cause]
    if answer.fix is None:
        return ItemGrade(
            "fix",
            MISSING,
            None,
            fits,
            None,
            f"You left this blank; for this symptom: {FIXES[fits[0]]}.",
        )
    verdict = CORRECT if answer.fix in fits else WRONG
    effect = fix_effect(scenario, w, answer.fix)
    if verdict == WRONG:
        effect += f" It does not address {TITLES[scenario.top_cause]}: try {FIXES[fits[0]]}."
    return ItemGrade(
        "fix",
        verdict,
        answer.fix,
        fits,
        None,
        f"You chose to {FIXES[answer.fix]} ({verdict}). {effect}",
    )


def fix_effect(scenario: Scenario, w: Worked, fix: str) -> str:
    """What a fix does to this scenario's numbers, and what it costs."""
    s, dep = scenario, scenario.deployment
    if fix == "lower_budget":
        return (
            f"At {s.smaller_chunk_tokens:,} tokens per step the slow step shrinks from "
            f"{_ms(w.mixed_step_seconds)} to {_ms(w.smaller_mixed_step_seconds)}, but a prompt "
            f"of {s.prompt_tokens:,} tokens needs {w.smaller_prefill_steps} steps instead of "
            f"{w.prefill_steps}, so TTFT rises."
        )
    if fix == "disaggregate":
        return (
            f"Decode steps never carry a chunk, so ITL stays near the {_ms(w.floor_seconds)} "
            "floor; the price is a separate prefill pool and a KV transfer per request."
        )
    if fix == "cap_or_fp8_kv":
        half = decode_step(
            dep, batch_size=max(s.batch_size // 2, 1), context_tokens=s.context_tokens
        )
        fp8 = (
            f"FP8 KV halves the {_ms(w.kv_read_seconds)} KV term"
            if dep.kv.bytes_per_element > 1
            else "The KV cache is already FP8"
        )
        return (
            f"{fp8}; capping max_num_seqs at {max(s.batch_size // 2, 1)} brings the floor from "
            f"{_ms(w.floor_seconds)} to {_ms(half.floor_seconds)} at the cost of throughput."
        )
    if fix == "add_replicas":
        half = decode_step(
            dep, batch_size=max(s.batch_size // 2, 1), context_tokens=s.context_tokens
        )
        return (
            f"Twice the replicas halve each one's batch: floor {_ms(w.floor_seconds)} -> "
            f"{_ms(half.floor_seconds)}, for twice the GPUs."
        )
    if fix == "cuda_graphs":
        return (
            f"Removes launch and sampling gaps between kernels; the {_ms(w.floor_seconds)} "
            "floor itself does not move."
        )
    if fix == "chunked_off":
        whole = mixed_step(
            dep,
            batch_size=s.batch_size,
            context_tokens=s.context_tokens,
            chunk_tokens=s.prompt_tokens,
        )
        return (
            f"A prompt of {s.prompt_tokens:,} tokens would then go in one step of about "
            f"{_ms(whole.step_seconds)} that every running stream waits for: ITL p99 gets worse."
        )
    raise ConfigError(f"unknown fix {fix!r}; valid fixes: {', '.join(FIXES)}")


def find_mistakes(scenario: Scenario, w: Worked, answer: Answer) -> tuple[Mistake, ...]:
    """The classic mistakes, each read off the user's own inputs."""
    found = []
    floor = answer.floor_seconds
    if floor is not None and floor > 0:
        to_weights = relative_error(answer=floor, worked=w.weight_read_seconds)
        to_floor = relative_error(answer=floor, worked=w.floor_seconds)
        if to_weights <= CLOSE_WITHIN and to_weights < to_floor and to_floor > CORRECT_WITHIN:
            found.append(
                Mistake(
                    "floor_from_weights_alone",
                    MISTAKES["floor_from_weights_alone"],
                    f"Your {_ms(floor)} is the weight read ({_ms(w.weight_read_seconds)}) on its "
                    f"own. Every step also reads each live sequence's KV: "
                    f"{format_bytes(w.kv_bytes)}, {w.kv_bytes / w.weight_bytes:.1f}x the weight "
                    f"bytes here, which adds {_ms(w.kv_read_seconds)}.",
                )
            )
    if answer.p99_meaning == "slowest_request":
        found.append(
            Mistake(
                "p99_as_slowest_request",
                MISTAKES["p99_as_slowest_request"],
                "ITL is observed per token gap, not per request, so p99 is set by the slowest "
                f"1% of steps. Here those are the steps that carry a prefill chunk "
                f"({_ms(w.mixed_step_seconds)}), and every running stream sits through them.",
            )
        )
    if answer.fix == "lower_budget" and not answer.checked_ttft:
        found.append(
            Mistake(
                "budget_without_ttft_check",
                MISTAKES["budget_without_ttft_check"],
                f"A budget of {scenario.smaller_chunk_tokens:,} tokens turns the prefill of a "
                f"prompt of {scenario.prompt_tokens:,} tokens into {w.smaller_prefill_steps} "
                f"steps (from {w.prefill_steps}); confirm TTFT p99 still meets its SLO before "
                "shipping.",
            )
        )
    if answer.signal == "gpu_utilisation":
        found.append(
            Mistake(
                "gpu_utilisation",
                MISTAKES["gpu_utilisation"],
                "Utilisation only says a kernel was running; it reads near 100% in the fast "
                "steps and in the slow ones alike, so it cannot tell the causes apart.",
            )
        )
    return tuple(found)


def rubric(items: dict[str, ItemGrade], mistakes: tuple[Mistake, ...]) -> Rubric:
    """Weak / Hire / Strong Hire from what was entered (after the reference's scoring section).

    Hire: a weights + KV floor, the right first cause, and a fix that treats it.
    Strong Hire: also the chunked step quantified, the ranking, the signal that separates the
    causes, what p99 means, the TTFT price of the fix, and none of the classic mistakes.
    """
    hire = {
        "floor computed from weights and KV": items["floor"].ok and items["kv_term"].ok,
        "right first cause": items["ranking"].ok,
        "a fix that treats that cause": items["fix"].verdict == CORRECT,
    }
    strong = {
        "the chunked step quantified": items["mixed_step"].ok,
        "top two causes in order": items["ranking"].verdict == CORRECT,
        "a signal that separates the causes": items["signal"].verdict == CORRECT,
        "p99 read as slow steps, not slow requests": items["p99"].verdict == CORRECT,
        "the TTFT price of a smaller budget": items["prefill_steps"].ok,
        "none of the classic mistakes": not mistakes,
    }
    met = tuple(k for k, ok in {**hire, **strong}.items() if ok)
    if not all(hire.values()):
        return Rubric(WEAK, met, tuple(k for k, ok in hire.items() if not ok))
    if not all(strong.values()):
        return Rubric(HIRE, met, tuple(k for k, ok in strong.items() if not ok))
    return Rubric(STRONG_HIRE, met, ())


def grade(scenario: Scenario, answer: Answer) -> Grade:
    """Grade every item of an answer against the scenario's worked numbers."""
    for name, value, menu in (
        ("p99 meaning", answer.p99_meaning, P99_CHOICES),
        ("signal", answer.signal, SIGNALS),
        ("fix", answer.fix, FIXES),
    ):
        if value is not None and value not in menu:
            raise ConfigError(f"unknown {name} {value!r}; valid: {', '.join(menu)}")
    w = worked_numbers(scenario)
    top = scenario.top_cause
    items = (
        _grade_floor(scenario, w, answer),
        _grade_kv(scenario, w, answer),
        _grade_mixed(scenario, w, answer),
        grade_ranking(scenario, tuple(answer.ranking)),
        _grade_choice(
            "p99",
            answer.p99_meaning,
            P99_RIGHT,
            P99_CHOICES,
            "Each token gap is one observation, so the tail is made of slow steps that every "
            "running stream shares.",
        ),
        _grade_choice(
            "signal",
            answer.signal,
            SIGNAL_FOR_CAUSE[top],
            SIGNALS,
            f"It is the fingerprint of {TITLES[top]}.",
        ),
        _grade_fix(scenario, w, answer),
        _grade_prefill_steps(scenario, w, answer),
    )
    mistakes = find_mistakes(scenario, w, answer)
    level = rubric({i.key: i for i in items}, mistakes)
    sanity = (
        f"Sanity check: the observed p50 of {_ms(scenario.observed_p50_seconds)} against the "
        f"{_ms(w.floor_seconds)} floor is {format_percent(w.observed_mbu)} of HBM bandwidth"
        + (
            ", ordinary for a real server."
            if w.observed_mbu >= OBSERVED_MBU[0] - 0.05
            else ", too low for bandwidth alone: something other than the GPU sets the pace."
        )
    )
    return Grade(scenario, w, items, mistakes, level, sanity)


# ---- follow-up questions ----------------------------------------------------------------------
@dataclass(frozen=True)
class FollowUp:
    """A probe an interviewer asks next, and an answer with this scenario's numbers."""

    key: str
    question: str
    answer: str


def follow_ups(scenario: Scenario) -> tuple[FollowUp, ...]:
    """The three classic follow-ups, answered for this scenario."""
    s, w = scenario, worked_numbers(scenario)
    return (
        FollowUp(
            "ttft_first",
            "Product now ranks TTFT above smooth streaming. What would you change?",
            f"Leave the budget at {s.chunk_tokens:,} tokens (or raise it): a prompt of "
            f"{s.prompt_tokens:,} tokens finishes prefill in {w.prefill_steps} steps. "
            f"The cost is that every running stream sits through a {_ms(w.mixed_step_seconds)} "
            f"step ({w.over_floor:.1f}x the floor) whenever a chunk is on board. Make that a "
            "decision you can see: agree an ITL p99 target and alert on it, rather than letting "
            "it drift.",
        ),
        _follow_up_70b(scenario),
        _follow_up_chunked_off(scenario, w),
    )


def _follow_up_70b(scenario: Scenario) -> FollowUp:
    s, dep, own = scenario, scenario.deployment, worked_numbers(scenario)
    question = "Same traffic, but the model is Llama 3.1 70B split over 4 GPUs (TP=4). What moves?"
    big = Deployment.create(
        model="llama-3.1-70b",
        gpu=dep.gpu,
        weight_precision=dep.weights,
        kv_precision=dep.kv,
        tp=4,
        mfu=MFU,
    )
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    decode = decode_step(big, **load)
    mixed = mixed_step(big, chunk_tokens=s.chunk_tokens, **load)
    cap = capacity(big, context_tokens=s.context_tokens)
    fits = (
        ""
        if cap.fits(batch_size=s.batch_size)
        else (f" Careful: at this load it does not fit ({cap.explain(batch_size=s.batch_size)}).")
    )
    answer = (
        f"Same decomposition, per GPU. Llama 3.1 70B in {dep.weights.name.upper()} puts "
        f"{format_bytes(decode.weight_bytes)} of weights on each of the 4 {dep.gpu.slug} GPUs: "
        f"a weight read of {_ms(decode.weight_read_seconds)}; the KV term at "
        f"{s.batch_size} x {s.context_tokens:,} is {_ms(decode.kv_read_seconds)} per GPU, so the "
        f"floor is {_ms(decode.floor_seconds)}. New is the all-reduce after attention and after "
        f"the MLP in each layer: {_ms(decode.allreduce_seconds)} per decode step over "
        f"{dep.gpu.interconnect}. Each GPU does a quarter of the chunk's GEMMs, "
        f"{float(mixed.matmul_flops) / 1e12:.1f} TFLOP per GPU against "
        f"{own.mixed_matmul_flops / 1e12:.1f} TFLOP in your scenario, so a chunk of "
        f"{s.chunk_tokens:,} tokens makes the step {_ms(mixed.step_seconds)} with the "
        f"all-reduce, {float(mixed.step_seconds) / float(decode.floor_seconds):.1f}x the floor."
        + fits
    )
    return FollowUp("seventy_b_tp4", question, answer)


def _follow_up_chunked_off(scenario: Scenario, w: Worked) -> FollowUp:
    s, dep = scenario, scenario.deployment
    whole = mixed_step(
        dep, batch_size=s.batch_size, context_tokens=s.context_tokens, chunk_tokens=s.prompt_tokens
    )
    return FollowUp(
        "chunked_off",
        "Chunked prefill causes the stalls, so why not run with chunked prefill off?",
        f"The prompt does not go away, it arrives in one piece: a {s.prompt_tokens:,}-token "
        f"prefill becomes one step of about {_ms(whole.step_seconds)} instead of "
        f"{w.prefill_steps} steps of {_ms(w.mixed_step_seconds)}, and every running stream waits "
        "for all of it. The worst gaps grow, so ITL p99 gets worse, not better.",
    )
