"""Read a runs file (format `itlkit-runs/1`): real serving runs with what was measured.

Each run names a deployment (a catalog model or a `config.json`'s fields, GPU, TP, precisions),
the engine's settings, a workload (arrival stages, prompt structure, output length) and the
client-side latencies measured. The format is described in `data/real-runs/README.md`
(copied from `shared/fixtures/real_runs_trainval.md`). Values the file leaves `null` take the
file's `defaults_for_null`, then, in a run that names its vLLM version (`engine.vllm_version`,
or `engine.version`), that release's defaults on the run's GPU (`sim.versions`, every default
taken said in `Run.engine_assumptions`). A workload whose arrival rates are unknown keeps
`stages=None`, so that a simulation says it cannot run it instead of guessing. Every error names
the file, the run and the field. Read-time checks also refuse what vLLM would not start or
serve (a TP that does not split the heads, no room for one `max_model_len` context, a budget
below it without chunked prefill, requests longer than it), sizes beyond what a simulation
rebuilds in about a minute (the `MOST_*` table) and measurements no run can produce (a TTFT above
its E2E, quantile levels outside (0, 1)).

Optional per-run fields beyond that format: `interconnect` ("nvlink", "pcie" or "network": the link
TP's all-reduces cross; a run whose `flags` hold "tp_across_nodes" reads as "network"), and
`source` (`{"repo": ...}` or a string: the publisher, for leave-one-source-out errors).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import partial

from itlkit.errors import ConfigError, SettingError, UnknownNameError
from itlkit.input_files import read_json_file
from itlkit.physics.engine_memory import cuda_total_bytes, vllm_kv_cache
from itlkit.physics.hardware import get_gpu
from itlkit.physics.hf_config import model_from_hf_dict
from itlkit.physics.model import Model, check_tensor_parallel
from itlkit.physics.model_catalog import get_model
from itlkit.physics.model_names import guess_model
from itlkit.physics.roofline import INTERCONNECT_KINDS, Deployment, tp_link_assumption
from itlkit.sim.lengths import (
    Fixed,
    LogNormal,
    Quantiles,
    Uniform,
    vllm_random_output_lengths,
    vllm_random_prompt_lengths,
)
from itlkit.sim.versions import VllmVersion, engine_defaults, parse_vllm_version
from itlkit.sim.workload import Lengths
from itlkit.units import format_bytes, kv_precision, weight_precision

FORMAT = "itlkit-runs/1"
MEASURED_KEYS = (
    "e2e_mean_seconds", "e2e_p90_seconds", "e2e_p99_seconds",
    "ttft_mean_seconds", "ttft_p90_seconds", "ttft_p99_seconds", "itl_mean_seconds",
)  # fmt: skip
# Measured statistics a run may leave null where its client printed none (SGLang's bench_serving
# prints no p90; `vllm bench serve` prints no E2E without --percentile-metrics e2el): a
# converter writes null rather than a bound. The means are required: calibrate fits on them.
OPTIONAL_MEASURED_KEYS = ("e2e_p90_seconds", "e2e_p99_seconds", "ttft_p90_seconds",
                          "ttft_p99_seconds")  # fmt: skip
_ENGINE_DEFAULTS = {"max_num_seqs": 128, "max_model_len": 4096, "gpu_memory_utilization": 0.9}

# The per-token ITL quantiles a bench run records and a prediction gives, for the jitter fit.
ITL_QUANTILE_LEVELS = (0.5, 0.9, 0.99, 0.998)

# Template tokens when a run does not say: the one run whose client measured its prompts served
# 591.63 tokens against 100 + 466 (Llama-2-7B codegen, `prompt_template_tokens` 25.63).
DEFAULT_PROMPT_TEMPLATE_TOKENS = 25.63

# The largest sizes a run may give. The fixture's runs send 7,200-9,000 requests of ~800 tokens;
# rebuilding and simulating a run costs ~30 us per request (100,000 requests: 2.8 s) and the
# prefix-cache replay ~0.3 us per 16-token block it walks, so these keep one run near a minute.
MOST_RUN_REQUESTS = 1_000_000
MOST_PREFIX_BLOCKS = 50_000_000  # blocks of every prompt sent, which the replay walks one by one
MOST_MODEL_LEN = 10_000_000  # Llama 4 Scout's 10M-token context, the longest published
MOST_BLOCK_SIZE = 1024  # vLLM's BlockSize is 1-256 tokens (vllm/config/cache.py); hybrids more
MOST_TP = 1024  # GPUs in one tensor-parallel group
MOST_SEQS = 10**7  # engine.max_num_seqs
MOST_BATCHED_TOKENS = 10**8  # engine.max_num_batched_tokens
MOST_PASSES = 10**6  # SGLang's scheduler passes: engine.scheduler_recv_interval and the like
MOST_RATE_PER_SECOND = 1e6  # one stage's arrivals per second
MOST_STAGE_SECONDS = 1e7  # one stage: about four months
MOST_BURSTINESS = 1e3  # vllm bench serve's gamma shape: 1e3 is already nearly evenly spaced

# How the client sends (`workload.arrival`), and the fields each one reads.
ARRIVALS = {
    "poisson-fixed-count": "inference-perf's constant load: rate x duration requests per stage "
    "of workload.stages, exponential gaps rescaled to fill the stage",
    "vllm-bench": "vllm bench serve: workload.num_prompts requests at "
    'workload.request_rate_per_second (a number, or "inf": all at t = 0), gamma gaps of shape '
    "workload.burstiness (default 1: Poisson)",
}
DEFAULT_ARRIVAL = "poisson-fixed-count"
DISTRIBUTION_KINDS = ("fixed", "uniform", "lognormal", "quantiles", "vllm-random")


@dataclass(frozen=True)
class Stage:
    """Open-loop arrivals at one rate for one duration (inference-perf's `constant` load)."""

    rate_per_second: float
    duration_seconds: float

    @property
    def requests(self) -> int:
        """Requests the stage sends: exactly rate x duration, rounded (a fixed count)."""
        return round(self.rate_per_second * self.duration_seconds)


@dataclass(frozen=True)
class RunWorkload:
    """What the client sent; `stages` is None when the file does not know the arrival rates."""

    name: str
    stages: tuple[Stage, ...] | None
    output_tokens_mean: float
    output_tokens_target: float | None  # max_tokens the client asked for
    ignore_eos: bool  # the server generates the target whatever the client counts
    prompt_tokens_mean: float | None
    system_prompts: int | None
    prompts_per_system_prompt: int | None
    system_prompt_tokens: int | None
    question_tokens: int | None
    prompt_template_tokens: float | None
    parent: str | None
    # The client beyond inference-perf's (optional fields; the defaults are the format's
    # original meaning): how it sends (`ARRIVALS`), a closed loop's slots, drawn lengths and
    # the share of requests that resend an earlier prompt.
    arrival: str = DEFAULT_ARRIVAL
    num_prompts: int | None = None  # vllm-bench: requests sent
    request_rate_per_second: float | None = None  # vllm-bench: inf = a burst at t = 0
    burstiness: float = 1.0  # vllm-bench: gamma shape of the gaps
    max_concurrency: int | None = None  # a closed-loop client's slots (None: open loop)
    prompt_distribution: Lengths | None = None  # per-request prompt lengths
    output_distribution: Lengths | None = None  # per-request output lengths
    repeat_share: float = 0.0  # requests that resend an earlier request's prompt
    # the first N requests' prompts, sent to the server by an earlier run (a repeated --seed)
    prompts_sent_before: int = 0
    # of each of those prompts, the leading tokens the earlier run sent (a shorter
    # --random-input-len under the same --seed); None: the whole prompt
    prefix_tokens_sent_before: int | None = None

    @property
    def client(self) -> str:
        """How the client sent: "closed loop", "burst" (all at t = 0) or "open loop"."""
        if self.max_concurrency is not None:
            return "closed loop"
        if self.request_rate_per_second is not None and math.isinf(self.request_rate_per_second):
            return "burst"
        return "open loop"

    @property
    def prompt_tokens(self) -> int | None:
        """Tokens of each served prompt: the measured mean, else system prompt + question +
        template tokens (re-tokenisation adds them), else the prompt distribution's mean; None
        when the file says none of these."""
        if self.prompt_tokens_mean:
            return round(self.prompt_tokens_mean)
        if self.system_prompt_tokens is None or self.question_tokens is None:
            if self.prompt_distribution is not None:
                return round(self.prompt_distribution.mean_tokens)
            return None
        template = self.prompt_template_tokens
        template = DEFAULT_PROMPT_TEMPLATE_TOKENS if template is None else template
        return round(self.system_prompt_tokens + self.question_tokens + template)

    @property
    def requests(self) -> int | None:
        if self.arrival == "vllm-bench":
            return self.num_prompts
        return None if self.stages is None else sum(stage.requests for stage in self.stages)

    @property
    def cycles_prompts(self) -> bool:
        """Whether the client cycles inference-perf's fixed list of distinct prompts
        (`system_prompts` x `prompts_per_system_prompt`) rather than drawing one per request."""
        return self.system_prompts is not None or self.prompts_per_system_prompt is not None

    @property
    def draws_prompts(self) -> bool:
        """Whether each request's prompt is drawn on its own (vllm bench serve's datasets, or a
        run that gives a prompt distribution or a repeat share): no prompt cycle."""
        asked = self.arrival == "vllm-bench" or self.prompt_distribution is not None
        reused = self.repeat_share > 0 or self.prompts_sent_before > 0
        return not self.cycles_prompts and (asked or reused)


@dataclass(frozen=True)
class Run:
    """One real run: deployment, engine settings, workload and the measured latencies."""

    id: str
    model: Model
    gpu: str
    tp: int
    weights_precision: str
    kv_precision: str
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    gpu_memory_utilization: float
    block_size: int
    chunked_prefill: bool
    prefix_caching: bool
    workload: RunWorkload
    measured: dict[str, float]
    itl_per_token_quantiles_seconds: dict[float, float]
    replay: object | None = None  # a `Workload` sent as recorded (a bench file), else rebuilt
    # engine.vllm_version (or engine.version): the release whose defaults filled the engine
    # fields the run leaves null, and one line per default taken (`versions.engine_defaults`)
    vllm_version: str | None = None
    engine_assumptions: tuple[str, ...] = ()
    # the link TP's all-reduces cross: "nvlink", "pcie" or "network" (TP across nodes); None:
    # the GPU's own. Read from `interconnect`, or the flag "tp_across_nodes" in `flags`.
    interconnect: str | None = None
    source: str = ""  # where the run was published (`source.repo`, else the file)
    # engine.name "sglang": SGLang's schedule (`sim.sglang`), its KV pool in one-token pages;
    # max_num_seqs 0 then means SGLang's default from the KV pool
    serving_engine: str = "vllm"
    mixed_chunk: bool = False  # SGLang's --enable-mixed-chunk
    schedule_conservativeness: float = 1.0  # SGLang's --schedule-conservativeness
    scheduler_recv_interval: int = 1  # SGLang's --scheduler-recv-interval
    num_continuous_decode_steps: int = 1  # SGLang's flag of that name (it reads it nowhere)
    async_scheduling: bool = False  # vLLM's --async-scheduling: given, else its release's default

    @property
    def engine(self) -> str:
        """The engine the run used: vLLM's generation "V0" or "V1" (V1 where no version is
        named), or "SGLang"."""
        if self.serving_engine == "sglang":
            return "SGLang"
        release = self.release
        return release.engine if release is not None else "V1"

    @property
    def release(self) -> VllmVersion | None:
        """The vLLM release the run names (`engine.vllm_version`), None where it names none."""
        if not self.vllm_version:
            return None
        # the label `VllmVersion.label` wrote: "vLLM 0.6.3 (given as '0.6.3.post1')", "V0 (...)"
        return parse_vllm_version(self.vllm_version.removeprefix("vLLM ").split(" ")[0])

    @property
    def gpu_family(self) -> str:
        return self.gpu.split("-")[0]


_KINDS = {int: "a whole number", float: "a number", str: "a string"}


class _Reader:
    """Typed reads of one run's fields; errors name the file, the run and the field."""

    def __init__(self, source: str, run_id: str):
        self.where = f"{source}: run {run_id!r}"

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: {key} {problem}")

    def get(self, doc: dict, key: str, kind: type | tuple, *, optional: bool = False,
            name: str | None = None):  # fmt: skip
        """`doc[key]` of this type (`name`: the field as the error calls it, default `key`)."""
        name = name or key
        value = doc.get(key) if isinstance(doc, dict) else None
        if value is None:
            if optional:
                return None
            raise self.fail(name, "is missing")
        if kind in (int, float) and isinstance(value, bool):
            raise self.fail(name, f"must be a number, got {value!r}")
        if kind is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, kind):
            raise self.fail(name, f"must be {_KINDS.get(kind, kind)}, got {value!r:.60}")
        return value

    def positive(self, doc: dict, key: str, kind=float, *, optional: bool = False,
                 most: float = math.inf, name: str | None = None):  # fmt: skip
        """A number > 0 and at most `most` (finite)."""
        value = self.get(doc, key, kind, optional=optional, name=name)
        if value is not None and not (0 < value <= most and math.isfinite(value)):
            if kind is int:
                bound = f"a whole number from 1 to {most:,}"
            else:
                bound = "a finite number > 0" + ("" if math.isinf(most) else f" up to {most:,.15g}")
            raise self.fail(name or key, f"must be {bound}, got {value!r:.60}")
        return value


def _model(r: _Reader, doc) -> tuple[Model, tuple[str, ...]]:
    """The run's model, and how a served name given for it was read (a Hugging Face id such as
    `meta-llama/Llama-3.1-8B-Instruct`, read as its catalog architecture: `guess_model`)."""
    if isinstance(doc, str):
        try:
            return get_model(doc), ()
        except UnknownNameError as exc:
            guess = guess_model(doc)
            if guess is None:
                raise r.fail("model", str(exc)) from None
            said = f"model {doc[:80]!r} {guess.reading} (the run's weights_precision prices it)"
            return get_model(guess.slug), (said,)
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise r.fail("model", "must be a catalog name or {name, config}")
    name = r.get(doc, "name", str, name="model.name")
    model = model_from_hf_dict(doc["config"], where=f"{r.where} model", slug=name.split("/")[-1])
    return model, ()


def _stages(r: _Reader, doc) -> tuple[Stage, ...] | None:
    if doc is None:
        return None
    if not isinstance(doc, list) or not doc:
        raise r.fail("workload.stages", "must be a non-empty list or null")
    stages = []
    for i, item in enumerate(doc):
        at = f"workload.stages[{i}]"
        if not isinstance(item, dict):
            raise r.fail(at, "must be an object with rate_per_second and duration_seconds")
        rate = r.positive(item, "rate_per_second", most=MOST_RATE_PER_SECOND,
                          name=f"{at}.rate_per_second")  # fmt: skip
        seconds = r.positive(item, "duration_seconds", most=MOST_STAGE_SECONDS,
                             name=f"{at}.duration_seconds")  # fmt: skip
        stages.append(Stage(rate, seconds))
    return tuple(stages)


def _workload(r: _Reader, doc) -> RunWorkload:
    if not isinstance(doc, dict):
        raise r.fail("workload", "must be an object")

    def tokens(key: str, kind=float, optional=True):  # at most a context (the run's: later)
        return r.positive(doc, key, kind, optional=optional, most=MOST_MODEL_LEN,
                          name=f"workload.{key}")  # fmt: skip

    def prompts(key: str):
        return r.positive(doc, key, int, optional=True, most=MOST_RUN_REQUESTS,
                          name=f"workload.{key}")  # fmt: skip

    client = _client(r, doc)
    return RunWorkload(
        name=r.get(doc, "name", str, name="workload.name"),
        stages=_stages(r, doc.get("stages")) if client["arrival"] == DEFAULT_ARRIVAL else None,
        output_tokens_mean=tokens("output_tokens_mean", optional=False),
        output_tokens_target=tokens("output_tokens_target"),
        ignore_eos=_flag(r, doc, "ignore_eos", default=False),
        prompt_tokens_mean=tokens("prompt_tokens_mean"),
        system_prompts=prompts("system_prompts"),
        prompts_per_system_prompt=prompts("prompts_per_system_prompt"),
        system_prompt_tokens=tokens("system_prompt_tokens", int),
        question_tokens=tokens("question_tokens", int),
        prompt_template_tokens=_template_tokens(r, doc),
        parent=r.get(doc, "parent", str, optional=True, name="workload.parent"),
        **client,
    )


def _client(r: _Reader, doc: dict) -> dict:
    """The optional client fields: arrival kind and its numbers, concurrency, lengths, repeats."""
    arrival = doc.get("arrival")
    arrival = DEFAULT_ARRIVAL if arrival is None else arrival
    if not isinstance(arrival, str) or arrival not in ARRIVALS:  # a list is not hashable
        raise r.fail("workload.arrival", f"must be one of {', '.join(map(repr, ARRIVALS))}, "
                     f"got {arrival!r:.60}")  # fmt: skip
    out = {"arrival": arrival}
    bench = ("num_prompts", "request_rate_per_second", "burstiness")
    if arrival == "vllm-bench":
        if doc.get("stages") is not None:
            raise r.fail("workload.stages", "must be null with arrival 'vllm-bench', whose "
                         "client sends workload.num_prompts requests instead")  # fmt: skip
        out["num_prompts"] = r.positive(doc, "num_prompts", int, most=MOST_RUN_REQUESTS,
                                        name="workload.num_prompts")  # fmt: skip
        out["request_rate_per_second"] = _request_rate(r, doc)
        burstiness = r.positive(doc, "burstiness", optional=True, most=MOST_BURSTINESS,
                                name="workload.burstiness")  # fmt: skip
        out["burstiness"] = 1.0 if burstiness is None else burstiness
    else:
        given = [key for key in bench if doc.get(key) is not None]
        if given:
            raise r.fail(f"workload.{given[0]}", f"is read with arrival 'vllm-bench' only, not "
                         f"{arrival!r} (which sends workload.stages)")  # fmt: skip
    out["max_concurrency"] = r.positive(doc, "max_concurrency", int, optional=True,
                                        most=MOST_RUN_REQUESTS,
                                        name="workload.max_concurrency")  # fmt: skip
    out["prompt_distribution"] = _lengths(r, doc, "prompt_tokens_distribution", output=False)
    out["output_distribution"] = _lengths(r, doc, "output_tokens_distribution", output=True)
    share = r.get(doc, "repeat_share", float, optional=True, name="workload.repeat_share")
    if share is not None and not 0 <= share <= 1:  # NaN fails too
        raise r.fail("workload.repeat_share", f"must be a share from 0 to 1, got {share!r}")
    out["repeat_share"] = share or 0.0
    before = r.get(doc, "prompts_sent_before", int, optional=True,
                   name="workload.prompts_sent_before")  # fmt: skip
    if before is not None and not 0 <= before <= MOST_RUN_REQUESTS:
        raise r.fail(
            "workload.prompts_sent_before",
            f"must be a count of requests from 0 to {MOST_RUN_REQUESTS:,}, got {before}",
        )
    out["prompts_sent_before"] = before or 0
    prefix = r.positive(doc, "prefix_tokens_sent_before", int, optional=True,
                        most=MOST_RUN_REQUESTS * 10**4,
                        name="workload.prefix_tokens_sent_before")  # fmt: skip
    if prefix is not None and not before:
        raise r.fail("workload.prefix_tokens_sent_before", "says how much of the prompts an "
                     "earlier run sent; give workload.prompts_sent_before, how many")  # fmt: skip
    out["prefix_tokens_sent_before"] = prefix
    cycled = any(doc.get(k) is not None for k in ("system_prompts", "prompts_per_system_prompt"))
    for key, drawn in (("prompt_tokens_distribution", out["prompt_distribution"]),
                       ("repeat_share", out["repeat_share"]),
                       ("prompts_sent_before", out["prompts_sent_before"])):  # fmt: skip
        if cycled and drawn:
            raise r.fail(f"workload.{key}", "applies to prompts drawn per request, but this run "
                         "cycles system_prompts x prompts_per_system_prompt prompts (give one "
                         "or the other)")  # fmt: skip
    return out


def _request_rate(r: _Reader, doc: dict) -> float:
    """vllm-bench's request rate: a number of requests/s > 0, or "inf" (all at t = 0)."""
    if doc.get("request_rate_per_second") == "inf":
        return math.inf
    return r.positive(doc, "request_rate_per_second", most=MOST_RATE_PER_SECOND,
                      name="workload.request_rate_per_second")  # fmt: skip


def _lengths(r: _Reader, doc: dict, key: str, *, output: bool) -> Lengths | None:
    """A length distribution object: {"kind": fixed | uniform | lognormal | quantiles |
    vllm-random, ...} (see data/real-runs/README.md), or None when absent."""
    raw = doc.get(key)
    field = f"workload.{key}"
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("kind") not in DISTRIBUTION_KINDS:
        found = raw.get("kind") if isinstance(raw, dict) else raw
        raise r.fail(f"{field}.kind" if isinstance(raw, dict) else field,
                     f"must be an object whose kind is one of {', '.join(DISTRIBUTION_KINDS)}, "
                     f"got {found!r:.60}")  # fmt: skip
    kind = raw["kind"]

    def value(name: str, type_=float, optional: bool = False):
        return r.get(raw, name, type_, optional=optional, name=f"{field}.{name}")

    if kind == "fixed":
        make = partial(Fixed, value("tokens", int))
    elif kind == "uniform":
        make = partial(Uniform, value("low_tokens", int), value("high_tokens", int))
    elif kind == "lognormal":
        make = _lognormal(r, field, value)
    elif kind == "quantiles":
        make = partial(Quantiles, *(_numbers(r, raw, key, field) for key in ("levels", "tokens")))
    elif output:  # vllm-random: `vllm bench serve --dataset-name random`'s ranges
        make = partial(vllm_random_output_lengths, output_len=value("tokens", int),
                       range_ratio=value("range_ratio", optional=True) or 0.0)  # fmt: skip
    else:
        make = partial(vllm_random_prompt_lengths, input_len=value("tokens", int),
                       range_ratio=value("range_ratio", optional=True) or 0.0,
                       special_tokens=value("special_tokens", int, optional=True) or 0)  # fmt: skip
    try:
        return make()
    except ConfigError as exc:
        raise r.fail(field, f"is not usable: {exc}") from None


def _lognormal(r: _Reader, field: str, value):
    """median_tokens + sigma, mean_tokens + sigma, or mean_tokens + sd_tokens (max_tokens
    optional)."""
    most = value("max_tokens", int, optional=True)
    median, mean = value("median_tokens", optional=True), value("mean_tokens", optional=True)
    sigma, sd = value("sigma", optional=True), value("sd_tokens", optional=True)
    if (median is None) == (mean is None) or (sigma is None) == (sd is None) or (
            median is not None and sd is not None):  # fmt: skip
        raise r.fail(field, "a lognormal needs median_tokens and sigma, mean_tokens and sigma, "
                     "or mean_tokens and sd_tokens")  # fmt: skip
    if median is not None:
        return partial(LogNormal, median, sigma, most)
    if sigma is not None:
        return partial(LogNormal.from_mean, mean, sigma, most)
    return partial(LogNormal.from_mean_sd, mean, sd, most)


def _numbers(r: _Reader, raw: dict, name: str, field: str) -> tuple[float, ...]:
    values = raw.get(name)
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise r.fail(f"{field}.{name}", f"must be a list of numbers, got {values!r:.60}")
    return tuple(values)


def _template_tokens(r: _Reader, doc: dict) -> float | None:
    """Tokens re-tokenisation adds to system prompt + question: a finite number >= 0."""
    value = r.get(doc, "prompt_template_tokens", float, optional=True,
                  name="workload.prompt_template_tokens")  # fmt: skip
    if value is not None and not 0 <= value <= MOST_MODEL_LEN:
        raise r.fail("workload.prompt_template_tokens",
                     f"must be a number of tokens >= 0, got {value!r}")  # fmt: skip
    return value


def _flag(r: _Reader, doc: dict, key: str, *, default: bool) -> bool:
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise r.fail(key, f"must be true or false, got {value!r:.60}")
    return value


# Measured statistics that cannot exceed another, per request: a first token comes before the
# last, and a p90 is at most the p99 of the same requests.
_AT_MOST = (
    ("ttft_mean_seconds", "e2e_mean_seconds"), ("ttft_p90_seconds", "e2e_p90_seconds"),
    ("ttft_p99_seconds", "e2e_p99_seconds"), ("ttft_p90_seconds", "ttft_p99_seconds"),
    ("e2e_p90_seconds", "e2e_p99_seconds"), ("itl_mean_seconds", "e2e_mean_seconds"),
)  # fmt: skip


def _measured(r: _Reader, doc) -> tuple[dict[str, float], dict[float, float]]:
    if not isinstance(doc, dict):
        raise r.fail("measured", "must be an object")
    values = {k: r.positive(doc, k, name=f"measured.{k}", optional=k in OPTIONAL_MEASURED_KEYS)
              for k in MEASURED_KEYS}  # fmt: skip
    values = {k: v for k, v in values.items() if v is not None}
    for low, high in _AT_MOST:
        if low in values and high in values and values[low] > values[high]:
            raise r.fail(f"measured.{low}", f"({values[low]:g} s) is above measured.{high} "
                         f"({values[high]:g} s), which no run can measure")  # fmt: skip
    return values, _quantiles(r, doc.get("itl_per_token_quantiles_seconds") or {})


def _quantiles(r: _Reader, raw) -> dict[float, float]:
    """Per-token ITL quantiles: levels strictly between 0 and 1, values rising with the level."""
    field = "measured.itl_per_token_quantiles_seconds"
    if not isinstance(raw, dict):
        raise r.fail(field, "must be an object of level: seconds")
    quantiles = {}
    for level in raw:
        try:
            q = float(level)
        except ValueError:
            q = math.nan
        if not 0 < q < 1:  # NaN fails too
            raise r.fail(field, f"has the level {level!r:.40}; levels are numbers between 0 and 1")
        quantiles[q] = r.positive(raw, level, name=f"{field}[{level!r}]")
    ordered = sorted(quantiles.items())
    for (q0, v0), (q1, v1) in itertools.pairwise(ordered):
        if v1 < v0:
            raise r.fail(field, f"has {v1:g} s at {q1:g}, below {v0:g} s at the lower level {q0:g}")
    return dict(ordered)


def _engine(r: _Reader, doc, defaults: dict, gpu: str) -> dict:
    """The run's engine settings: as given, else `defaults_for_null`, else its vLLM version's
    defaults on its GPU (`_versioned_engine`), else itlkit's (`_ENGINE_DEFAULTS`, 16-token
    blocks, chunked prefill and prefix caching on)."""
    if not isinstance(doc, dict):
        raise r.fail("engine", "must be an object")
    if str(doc.get("name", "")).lower() == "sglang":
        return _sglang_engine(r, doc, defaults, gpu)
    version = _vllm_version(r, doc)
    if version is not None:
        return _versioned_engine(r, doc, defaults, gpu, version)

    def count(key: str, most, default=None):
        value = r.positive(doc, key, int, optional=default is not None, most=most,
                           name=f"engine.{key}")  # fmt: skip
        return value or default

    out = {
        "max_num_batched_tokens": count("max_num_batched_tokens", MOST_BATCHED_TOKENS),
        "max_num_seqs": count("max_num_seqs", MOST_SEQS, defaults["max_num_seqs"]),
        "max_model_len": count("max_model_len", MOST_MODEL_LEN, defaults["max_model_len"]),
        "block_size": count("block_size", MOST_BLOCK_SIZE, 16),
    }
    share = r.positive(doc, "gpu_memory_utilization", optional=True, most=1.0,
                       name="engine.gpu_memory_utilization")  # fmt: skip
    out["gpu_memory_utilization"] = share or defaults["gpu_memory_utilization"]
    for key, default in (("chunked_prefill", True), ("prefix_caching", True),
                         ("async_scheduling", False)):  # fmt: skip
        flag = doc.get(key, default)
        if not isinstance(flag, bool):
            raise r.fail(f"engine.{key}", f"must be true or false, got {flag!r:.60}")
        out[key] = flag
    return out


# vLLM's engine fields and SGLang's for the same knob: an SGLang run gives SGLang's.
SGLANG_NAMES_OF_VLLM = {
    "max_num_batched_tokens": "chunked_prefill_size",
    "max_num_seqs": "max_running_requests",
    "gpu_memory_utilization": "mem_fraction_static",
    "vllm_version": "no vLLM version",
}


def _sglang_engine(r: _Reader, doc: dict, defaults: dict, gpu: str) -> dict:
    """An SGLang run's settings in its own names (`chunked_prefill_size`, `max_prefill_tokens`,
    `max_running_requests`, `enable_mixed_chunk`, `mem_fraction_static`,
    `schedule_conservativeness`, `scheduler_recv_interval`, `num_continuous_decode_steps`),
    SGLang's defaults on the run's GPU for those left out (`sim.sglang`, each said; the memory
    share as at TP 1)."""
    from itlkit.sim.sglang import sglang_settings

    def count(key: str, most):
        return r.positive(doc, key, int, optional=True, most=most, name=f"engine.{key}")

    for vllm_name, own in SGLANG_NAMES_OF_VLLM.items():
        if doc.get(vllm_name) is not None:
            raise r.fail(f"engine.{vllm_name}", f"is vLLM's setting; an SGLang run gives {own}")
    mixed, no_radix = doc.get("enable_mixed_chunk"), doc.get("disable_radix_cache", False)
    if mixed is not None and not isinstance(mixed, bool):
        raise r.fail("engine.enable_mixed_chunk", f"must be true or false, got {mixed!r:.60}")
    if not isinstance(no_radix, bool):
        raise r.fail("engine.disable_radix_cache", f"must be true or false, got {no_radix!r:.60}")
    given = {
        "chunked_prefill_size": count("chunked_prefill_size", MOST_BATCHED_TOKENS),
        "max_prefill_tokens": count("max_prefill_tokens", MOST_BATCHED_TOKENS),
        "max_running_requests": count("max_running_requests", MOST_SEQS),
        "enable_mixed_chunk": mixed,
        "mem_fraction_static": r.positive(doc, "mem_fraction_static", optional=True, most=1.0,
                                          name="engine.mem_fraction_static"),
        "schedule_conservativeness": r.positive(doc, "schedule_conservativeness", optional=True,
                                                most=1e3, name="engine.schedule_conservativeness"),
        "scheduler_recv_interval": count("scheduler_recv_interval", MOST_PASSES),
        "num_continuous_decode_steps": count("num_continuous_decode_steps", MOST_PASSES),
    }  # fmt: skip
    hardware = get_gpu(gpu)
    settings = sglang_settings(gpu_memory_bytes=cuda_total_bytes(hardware)[0],
                               gpu_name=hardware.name, given=given)  # fmt: skip
    return {
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "max_num_seqs": settings.max_running_requests or 0,
        "max_model_len": count("max_model_len", MOST_MODEL_LEN) or defaults["max_model_len"],
        "gpu_memory_utilization": settings.mem_fraction_static,
        "block_size": 1,
        "chunked_prefill": True,
        "prefix_caching": not no_radix,  # SGLang's radix cache, unless --disable-radix-cache
        "serving_engine": "sglang",
        "mixed_chunk": settings.enable_mixed_chunk,
        "schedule_conservativeness": settings.schedule_conservativeness,
        "scheduler_recv_interval": settings.scheduler_recv_interval,
        "num_continuous_decode_steps": settings.num_continuous_decode_steps,
        "engine_assumptions": settings.assumptions,
    }


def _vllm_version(r: _Reader, doc: dict) -> VllmVersion | None:
    """engine.vllm_version, or engine.version where engine.name is "vllm" (or absent): the
    format's `version` field names the vLLM release (data/real-runs/README.md)."""
    named, version = doc.get("vllm_version"), doc.get("version")
    if named is not None and version is not None and named != version:
        raise r.fail("engine.vllm_version", f"({named!r:.40}) and engine.version "
                     f"({version!r:.40}) name different releases")  # fmt: skip
    field = "engine.vllm_version"
    engine = doc.get("name")
    if named is None and (engine is None or str(engine).lower() == "vllm"):
        named, field = version, "engine.version"
    if named is None:
        return None
    try:
        return parse_vllm_version(named)
    except ConfigError as exc:
        raise r.fail(field, str(exc)) from None


def _versioned_engine(r: _Reader, doc: dict, defaults: dict, gpu: str, version) -> dict:
    """The engine fields of a run that names its vLLM version: the run's, else the file's
    `defaults_for_null` where it states them, else the version's defaults on this GPU."""
    stated = defaults["stated"]
    said = []

    def count(key: str, most):
        value = r.positive(doc, key, int, optional=True, most=most, name=f"engine.{key}")
        if value is None and key in stated:
            value = defaults[key]
            said.append(f"{key} {value:,} (the file's defaults_for_null)")
        return value

    def flag(key: str):
        value = doc.get(key)
        if value is not None and not isinstance(value, bool):
            raise r.fail(f"engine.{key}", f"must be true or false, got {value!r:.60}")
        return value

    share = r.positive(doc, "gpu_memory_utilization", optional=True, most=1.0,
                       name="engine.gpu_memory_utilization")  # fmt: skip
    if share is None and "gpu_memory_utilization" in stated:
        share = defaults["gpu_memory_utilization"]
        said.append(f"gpu_memory_utilization {share:g} (the file's defaults_for_null)")
    longest = count("max_model_len", MOST_MODEL_LEN)
    if longest is None:
        longest = defaults["max_model_len"]
        said.append(f"max_model_len {longest:,} (itlkit's default for a null engine.max_model_len; "
                    "vLLM takes the model's context length)")  # fmt: skip
    given = {
        "max_num_batched_tokens": count("max_num_batched_tokens", MOST_BATCHED_TOKENS),
        "max_num_seqs": count("max_num_seqs", MOST_SEQS),
        "block_size": count("block_size", MOST_BLOCK_SIZE),
        "gpu_memory_utilization": share,
        "enable_chunked_prefill": flag("chunked_prefill"),
        "enable_prefix_caching": flag("prefix_caching"),
    }
    hardware = get_gpu(gpu)
    try:
        s = engine_defaults(version, gpu_memory_bytes=cuda_total_bytes(hardware)[0],
                            gpu_name=hardware.name, max_model_len=longest, given=given,
                            async_scheduling=flag("async_scheduling"))  # fmt: skip
    except SettingError as exc:
        raise r.fail(f"engine.{exc.setting}", f"{exc.state}: {exc}") from None
    return {
        "max_num_batched_tokens": s.max_num_batched_tokens, "max_num_seqs": s.max_num_seqs,
        "max_model_len": longest, "block_size": s.block_size,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "chunked_prefill": s.enable_chunked_prefill, "prefix_caching": s.enable_prefix_caching,
        "vllm_version": s.version.label, "engine_assumptions": (*said, *s.assumptions),
        "async_scheduling": bool(s.async_scheduling),
    }  # fmt: skip


def _deployment(r: _Reader, doc, model: Model, gpu: str, engine: dict, interconnect) -> tuple:
    """(tp, weights precision, KV precision, the deployment), after refusing a deployment vLLM
    could not start: TP that does not split the heads, weights that do not fit, no room for one
    full context."""
    tp = r.positive(doc, "tp", int, most=MOST_TP)
    weights = _named(r, "weights_precision", weight_precision, r.get(doc, "weights_precision", str))
    kv = _named(r, "kv_precision", kv_precision, r.get(doc, "kv_precision", str))
    _named(r, "tp", lambda n: check_tensor_parallel(model, tp=n), tp)
    dep = Deployment(model=model, gpu=get_gpu(gpu), weights=weights, kv=kv, tp=tp,
                     gpu_memory_utilization=engine["gpu_memory_utilization"],
                     interconnect=interconnect)  # fmt: skip
    room = vllm_kv_cache(dep)  # the KV cache vLLM sizes from the memory CUDA reports
    if room.kv_tokens < engine["max_model_len"]:  # vLLM checks this at start-up (kv_cache_utils.py)
        raise r.fail(
            "engine.gpu_memory_utilization",
            f"{dep.gpu_memory_utilization:g} of {format_bytes(room.total_bytes)} (the GPU's CUDA "
            f"total) leaves {format_bytes(max(room.kv_bytes, 0))} per GPU beside the weights of "
            f"{dep.label} ({format_bytes(room.weight_bytes)}) and "
            f"{format_bytes(room.overhead_bytes)} of activations: {room.kv_tokens:,} KV tokens, "
            f"less than one {engine['max_model_len']:,}-token context (engine.max_model_len): "
            "vLLM would not start",
        )
    return tp, weights.name, kv.name, dep


def _check_engine(r: _Reader, engine: dict) -> None:
    """vLLM refuses a budget below max_model_len without chunked prefill (its
    `SchedulerConfig.verify_max_model_len`, vllm/config/scheduler.py)."""
    budget, longest = engine["max_num_batched_tokens"], engine["max_model_len"]
    if not engine["chunked_prefill"] and budget < longest:
        raise r.fail(
            "engine.max_num_batched_tokens",
            f"({budget:,}) is below engine.max_model_len ({longest:,}) with chunked_prefill "
            "false, a setting vLLM refuses at start-up (unchunked, a prompt must fit one step)",
        )


def _check_workload(r: _Reader, w: RunWorkload, engine: dict) -> None:
    """Sizes that a server with this max_model_len serves and a simulation can rebuild."""
    longest = engine["max_model_len"]
    prompt = w.prompt_tokens
    output = max(w.output_tokens_mean, w.output_tokens_target or 0)
    _check_distributions(r, w, longest, output)
    if prompt is not None and prompt + output > longest:
        raise r.fail(
            "workload",
            f"prompts of {prompt:,} tokens (prompt_tokens_mean, or system_prompt_tokens + "
            f"question_tokens + prompt_template_tokens) and {output:,.0f} output tokens exceed "
            f"engine.max_model_len ({longest:,}); vLLM refuses such requests",
        )
    if w.system_prompts and w.prompts_per_system_prompt:
        distinct = w.system_prompts * w.prompts_per_system_prompt
        if distinct > MOST_RUN_REQUESTS:
            raise r.fail(
                "workload.system_prompts",
                f"x prompts_per_system_prompt is {distinct:,} distinct prompts; at most "
                f"{MOST_RUN_REQUESTS:,}",
            )
    requests = w.requests
    if requests is None:
        return
    if not 1 <= requests <= MOST_RUN_REQUESTS:
        raise r.fail(
            "workload.stages",
            f"send {requests:,} requests (rate_per_second x duration_seconds, summed); a run "
            f"is simulated request by request, from 1 to {MOST_RUN_REQUESTS:,} of them",
        )
    blocks = requests * math.ceil((prompt or 0) / engine["block_size"])
    if blocks > MOST_PREFIX_BLOCKS:
        raise r.fail(
            "workload.stages",
            f"send {requests:,} prompts of {prompt:,} tokens: {blocks:,} KV blocks of "
            f"engine.block_size {engine['block_size']} for the prefix-cache replay to walk; at "
            f"most {MOST_PREFIX_BLOCKS:,} (fewer requests, or a larger block_size)",
        )


def _check_distributions(r: _Reader, w: RunWorkload, longest: int, output: float) -> None:
    """The longest prompt + output a run's distributions can draw must fit max_model_len (vLLM
    refuses a longer request)."""
    if w.prompt_distribution is None and w.output_distribution is None:
        return
    prompt = w.prompt_distribution.most_tokens if w.prompt_distribution else w.prompt_tokens or 0
    if w.output_distribution is not None:
        output = w.output_distribution.most_tokens
    if prompt + output > longest:
        which = " and ".join(
            f"workload.{key}_tokens_distribution"
            for key, dist in (("prompt", w.prompt_distribution), ("output", w.output_distribution))
            if dist is not None
        )
        raise r.fail(
            which,
            f"can draw prompts of {prompt:,} and outputs of {output:,.0f} tokens, more than "
            f"engine.max_model_len ({longest:,}); vLLM refuses such requests (bound the "
            "distribution: a lognormal's max_tokens, a uniform's high_tokens)",
        )


def _named(r: _Reader, key: str, look_up, value):
    """`look_up(value)`, its error (an unknown name, a TP that does not fit) naming the field."""
    try:
        return look_up(value)
    except (UnknownNameError, ConfigError) as exc:
        raise r.fail(key, f"is not usable: {exc}") from None


def _run(doc, *, source: str, defaults: dict) -> Run:
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise ConfigError(f"{source}: every run must be an object with a string 'id'")
    r = _Reader(source, doc["id"])
    gpu = r.get(doc, "gpu", str)
    _named(r, "gpu", get_gpu, gpu)
    measured, quantiles = _measured(r, doc.get("measured"))
    model, said = _model(r, doc.get("model"))
    engine = _engine(r, doc.get("engine"), defaults, gpu)
    interconnect = _interconnect(r, doc)
    tp, weights, kv, dep = _deployment(r, doc, model, gpu, engine, interconnect)
    link = tp_link_assumption(dep)
    said += (link,) if link else ()
    engine["engine_assumptions"] = (*said, *engine.get("engine_assumptions", ()))
    workload = _workload(r, doc.get("workload"))
    _check_engine(r, engine)
    _check_workload(r, workload, engine)
    return Run(
        id=doc["id"], model=model, gpu=gpu, tp=tp, weights_precision=weights, kv_precision=kv,
        **engine, workload=workload, measured=measured, itl_per_token_quantiles_seconds=quantiles,
        interconnect=interconnect, source=_source(doc, source),
    )  # fmt: skip


def _interconnect(r: _Reader, doc: dict) -> str | None:
    """`interconnect` ("nvlink", "pcie", "network"), else "network" where `flags` holds
    "tp_across_nodes", else None (the GPU's own link)."""
    link = r.get(doc, "interconnect", str, optional=True)
    if link is not None and link not in INTERCONNECT_KINDS:
        raise r.fail("interconnect", f"must be one of {', '.join(INTERCONNECT_KINDS)}, "
                                     f"got {link!r:.40}")  # fmt: skip
    flags = doc.get("flags")
    if link is None and isinstance(flags, list) and "tp_across_nodes" in flags:
        return "network"
    return link


def _source(doc: dict, source: str) -> str:
    """The run's publisher (`source.repo` or a string `source`), else the file it came from."""
    given = doc.get("source")
    if isinstance(given, dict) and isinstance(given.get("repo"), str):
        return given["repo"]
    return given if isinstance(given, str) and given else source


@dataclass(frozen=True)
class RunError:
    """A run of the file that cannot be read (`read_runs(..., lenient=True)`): its id and why."""

    id: str
    message: str


def parse_runs(doc, *, source: str = "<runs>", lenient: bool = False) -> tuple:
    """The runs of a parsed `itlkit-runs/1` document. With `lenient`, a run that cannot be read
    (an unknown model or GPU, a bad field) becomes a `RunError` in its place instead of failing
    the file; the file itself must still be well-formed."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError(f"{source}: not a runs file (format must be {FORMAT!r}, got {found!r})")
    runs = doc.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ConfigError(f"{source}: 'runs' must be a non-empty list")
    defaults = _defaults(doc.get("defaults_for_null"), source)
    parsed = tuple(_run_or_error(run, source, defaults, lenient) for run in runs)
    ids = [run.id for run in parsed]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ConfigError(f"{source}: run ids must be unique ({', '.join(twice)} repeat)")
    return parsed


def _defaults(doc, source: str) -> dict:
    """`defaults_for_null`: the engine values to assume where a run's field is null (`stated`:
    the keys the file gives, which a run naming its vLLM version takes before its defaults)."""
    if doc is None:
        return {**_ENGINE_DEFAULTS, "stated": frozenset()}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: defaults_for_null must be an object")
    out = {**_ENGINE_DEFAULTS, **doc}
    for key, most in (("max_num_seqs", MOST_SEQS), ("max_model_len", MOST_MODEL_LEN)):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ConfigError(
                f"{source}: defaults_for_null.{key} must be an integer from 1 to {most:,}"
            )
    share = out["gpu_memory_utilization"]
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise ConfigError(f"{source}: defaults_for_null.gpu_memory_utilization must be in (0, 1]")
    out["stated"] = frozenset(key for key in _ENGINE_DEFAULTS if doc.get(key) is not None)
    return out


def _run_or_error(doc, source: str, defaults: dict, lenient: bool):
    try:
        return _run(doc, source=source, defaults=defaults)
    except ConfigError as exc:
        if not lenient or not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
            raise
        return RunError(doc["id"], str(exc))


def read_runs(path, *, lenient: bool = False) -> tuple:
    """The runs of a runs file (`lenient`: unreadable runs as `RunError`s, see `parse_runs`)."""
    doc = read_json_file(path, kind="runs")
    return parse_runs(doc, source=str(path), lenient=lenient)
