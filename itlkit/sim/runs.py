"""Read a runs file (format `itlkit-runs/1`): real serving runs with what was measured.

Each run names a deployment (a catalog model or a `config.json`'s fields, GPU, TP, precisions),
the engine's settings, a workload (arrival stages, prompt structure, output length) and the
client-side latencies measured. The format is described in `tests/data/real_runs/README.md`
(copied from `shared/fixtures/real_runs_trainval.md`). Values the file leaves `null` take the
file's `defaults_for_null`; a workload whose arrival rates are unknown keeps `stages=None`, so
that a simulation says it cannot run it instead of guessing. Every error names the file and the
run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.input_files import read_json_file
from itlkit.physics.hardware import get_gpu
from itlkit.physics.hf_config import model_from_hf_dict
from itlkit.physics.model import Model
from itlkit.physics.model_catalog import get_model
from itlkit.units import kv_precision, weight_precision

FORMAT = "itlkit-runs/1"
MEASURED_KEYS = (
    "e2e_mean_seconds", "e2e_p90_seconds", "e2e_p99_seconds",
    "ttft_mean_seconds", "ttft_p90_seconds", "ttft_p99_seconds", "itl_mean_seconds",
)  # fmt: skip
_ENGINE_DEFAULTS = {"max_num_seqs": 128, "max_model_len": 4096, "gpu_memory_utilization": 0.9}

# The per-token ITL quantiles a bench run records and a prediction gives, for the jitter fit.
ITL_QUANTILE_LEVELS = (0.5, 0.9, 0.99, 0.998)


@dataclass(frozen=True)
class Stage:
    """Open-loop arrivals at one rate for one duration (inference-perf's `constant` load)."""

    rate_per_second: float
    duration_seconds: float


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

    @property
    def gpu_family(self) -> str:
        return self.gpu.split("-")[0]


class _Reader:
    """Typed reads of one run's fields; errors name the file, the run and the field."""

    def __init__(self, source: str, run_id: str):
        self.where = f"{source}: run {run_id!r}"

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: {key} {problem}")

    def get(self, doc: dict, key: str, kind: type | tuple, *, optional: bool = False):
        value = doc.get(key) if isinstance(doc, dict) else None
        if value is None:
            if optional:
                return None
            raise self.fail(key, "is missing")
        if kind in (int, float) and isinstance(value, bool):
            raise self.fail(key, f"must be a number, got {value!r}")
        if kind is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, kind):
            raise self.fail(key, f"must be {getattr(kind, '__name__', kind)}, got {value!r:.60}")
        return value

    def positive(self, doc: dict, key: str, kind=float, *, optional: bool = False):
        value = self.get(doc, key, kind, optional=optional)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise self.fail(key, f"must be a finite number > 0, got {value!r}")
        return value


def _model(r: _Reader, doc) -> Model:
    if isinstance(doc, str):
        try:
            return get_model(doc)
        except UnknownNameError as exc:
            raise r.fail("model", str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise r.fail("model", "must be a catalog name or {name, config}")
    name = r.get(doc, "name", str)
    return model_from_hf_dict(doc["config"], where=f"{r.where} model", slug=name.split("/")[-1])


def _stages(r: _Reader, doc) -> tuple[Stage, ...] | None:
    if doc is None:
        return None
    if not isinstance(doc, list) or not doc:
        raise r.fail("workload.stages", "must be a non-empty list or null")
    return tuple(
        Stage(r.positive(s, "rate_per_second"), r.positive(s, "duration_seconds")) for s in doc
    )


def _workload(r: _Reader, doc) -> RunWorkload:
    if not isinstance(doc, dict):
        raise r.fail("workload", "must be an object")
    opt = dict(optional=True)
    return RunWorkload(
        name=r.get(doc, "name", str),
        stages=_stages(r, doc.get("stages")),
        output_tokens_mean=r.positive(doc, "output_tokens_mean"),
        output_tokens_target=r.positive(doc, "output_tokens_target", **opt),
        ignore_eos=_flag(r, doc, "ignore_eos", default=False),
        prompt_tokens_mean=r.positive(doc, "prompt_tokens_mean", **opt),
        system_prompts=r.positive(doc, "system_prompts", int, **opt),
        prompts_per_system_prompt=r.positive(doc, "prompts_per_system_prompt", int, **opt),
        system_prompt_tokens=r.positive(doc, "system_prompt_tokens", int, **opt),
        question_tokens=r.positive(doc, "question_tokens", int, **opt),
        prompt_template_tokens=r.get(doc, "prompt_template_tokens", float, **opt),
        parent=r.get(doc, "parent", str, **opt),
    )


def _flag(r: _Reader, doc: dict, key: str, *, default: bool) -> bool:
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise r.fail(key, f"must be true or false, got {value!r}")
    return value


def _measured(r: _Reader, doc) -> tuple[dict[str, float], dict[float, float]]:
    if not isinstance(doc, dict):
        raise r.fail("measured", "must be an object")
    values = {k: r.positive(doc, k) for k in MEASURED_KEYS}
    raw = doc.get("itl_per_token_quantiles_seconds") or {}
    if not isinstance(raw, dict):
        raise r.fail("measured.itl_per_token_quantiles_seconds", "must be an object")
    quantiles = {}
    for level in raw:
        try:
            q = float(level)
        except ValueError:
            raise r.fail("measured.itl_per_token_quantiles_seconds", f"has key {level!r}") from None
        quantiles[q] = r.positive(raw, level)
    return values, dict(sorted(quantiles.items()))


def _engine(r: _Reader, doc, defaults: dict) -> dict:
    if not isinstance(doc, dict):
        raise r.fail("engine", "must be an object")
    out = {"max_num_batched_tokens": r.positive(doc, "max_num_batched_tokens", int)}
    for key in ("max_num_seqs", "max_model_len"):
        out[key] = r.positive(doc, key, int, optional=True) or defaults[key]
    share = r.positive(doc, "gpu_memory_utilization", optional=True)
    out["gpu_memory_utilization"] = share or defaults["gpu_memory_utilization"]
    if not 0 < out["gpu_memory_utilization"] <= 1:
        raise r.fail("engine.gpu_memory_utilization", "must be in (0, 1]")
    out["block_size"] = r.positive(doc, "block_size", int, optional=True) or 16
    for key in ("chunked_prefill", "prefix_caching"):
        flag = doc.get(key, True)
        if not isinstance(flag, bool):
            raise r.fail(f"engine.{key}", f"must be true or false, got {flag!r}")
        out[key] = flag
    return out


def _run(doc, *, source: str, defaults: dict) -> Run:
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise ConfigError(f"{source}: every run must be an object with a string 'id'")
    r = _Reader(source, doc["id"])
    gpu = r.get(doc, "gpu", str)
    try:
        get_gpu(gpu)
        weights = weight_precision(r.get(doc, "weights_precision", str)).name
        kv = kv_precision(r.get(doc, "kv_precision", str)).name
    except (UnknownNameError, ConfigError) as exc:
        raise ConfigError(f"{r.where}: {exc}") from None
    measured, quantiles = _measured(r, doc.get("measured"))
    return Run(
        id=doc["id"], model=_model(r, doc.get("model")), gpu=gpu,
        tp=r.positive(doc, "tp", int), weights_precision=weights, kv_precision=kv,
        **_engine(r, doc.get("engine"), defaults), workload=_workload(r, doc.get("workload")),
        measured=measured, itl_per_token_quantiles_seconds=quantiles,
    )  # fmt: skip


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
    """`defaults_for_null`: the engine values to assume where a run's field is null."""
    if doc is None:
        return dict(_ENGINE_DEFAULTS)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: defaults_for_null must be an object")
    out = {**_ENGINE_DEFAULTS, **doc}
    for key in ("max_num_seqs", "max_model_len"):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{source}: defaults_for_null.{key} must be an integer >= 1")
    share = out["gpu_memory_utilization"]
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise ConfigError(f"{source}: defaults_for_null.gpu_memory_utilization must be in (0, 1]")
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
