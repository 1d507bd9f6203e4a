"""vLLM versions and the engine settings each one defaults to, read from vLLM's own source.

`vllm serve` leaves most scheduler knobs unset and fills them in at start-up, by release, engine
(V0 or V1), GPU and context length. For a CUDA GPU, a decoder-only text model and no LoRA or
speculative decoding:

- V0, the default engine to 0.7.3 (and `VLLM_USE_V1=0` to 0.10.2): chunked prefill off unless
  max_model_len exceeds 32,768 tokens; then a token budget of 512 (to 0.6.4) or 2,048 (from
  0.6.5); off, a budget of max(max_model_len, 2,048). 256 sequences, no prefix caching. Without
  chunked prefill a step that admits prompts carries no decodes (vllm/core/scheduler.py
  `_schedule_default`); with it, decodes go first (`_schedule_chunked_prefill`), as in V1.
- V1, the default from 0.8.0 and the only engine from 0.11.0: chunked prefill and prefix caching
  on; the budget and the sequence limit by GPU, `V1_TIERS`: 8,192 and 1,024 where CUDA reports at
  least 70 GiB (from 0.9.0 unless the GPU is an A100), 2,048 and 256 below it (before 0.8.5 the
  GPU's name decided: H100 or H200); from 0.28.0, 16,384 and 1,024 from 160 GiB.

Each row of `RELEASES` is a range of releases whose defaults agree, with the files read. The
releases were read from their PyPI wheels (`pip download vllm==X --no-deps`: the tag's build);
from 0.10.1 on, the wheel names its commit (`vllm/_version.py`), given in the row's source.
`engine_defaults` applies a row to a GPU, a context length and the settings given, and says in
one line per default what it took and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from itlkit.errors import ConfigError, SettingError
from itlkit.sim.config import SchedulerConfig, admission_watermark
from itlkit.sim.intake import INTAKE_SECONDS_PER_PROMPT_TOKEN
from itlkit.units import format_release

GIB = 2**30  # vLLM compares the CUDA total in GiB (`GiB_bytes`, vllm/utils)

# Engine settings an engine_defaults caller may give, by their vLLM names.
SETTINGS = (
    "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill", "enable_prefix_caching",
    "block_size", "gpu_memory_utilization",
)  # fmt: skip

# ---- V0: constants of its defaults ---------------------------------------------------------
V0_MAX_NUM_SEQS = 256  # EngineArgs.max_num_seqs (to 0.6.4), __post_init__ (0.6.5-0.7.3),
# _set_default_args_v0 (0.8.0-0.10.2), vllm/engine/arg_utils.py
V0_LONG_CONTEXT_TOKENS = 32_768  # `use_long_context = max_model_len > 32768`, arg_utils.py
V0_UNCHUNKED_MIN_BUDGET = 2048  # `max(max_model_len, 2048)`, vllm/config.py SchedulerConfig


@dataclass(frozen=True)
class Tier:
    """One V1 tier of `vllm serve`'s batch defaults: the GPUs it takes, and their defaults."""

    min_cuda_total_bytes: float  # CUDA's total memory (`get_device_total_memory`), at least
    names_any: tuple[str, ...]  # the device name holds one of these (lower case); () any
    names_none: tuple[str, ...]  # ... and none of these
    max_num_batched_tokens: int
    max_num_seqs: int

    def takes(self, *, gpu_memory_bytes: float, gpu_name: str) -> bool:
        name = gpu_name.lower()
        return (
            gpu_memory_bytes >= self.min_cuda_total_bytes
            and (not self.names_any or any(n in name for n in self.names_any))
            and not any(n in name for n in self.names_none)
        )

    def describe(self) -> str:
        parts = []
        if self.min_cuda_total_bytes:
            parts.append(f"CUDA reports at least {self.min_cuda_total_bytes / GIB:g} GiB")
        if self.names_any:
            parts.append("its name holds " + " or ".join(n.upper() for n in self.names_any))
        if self.names_none:
            parts.append("it is not an " + " or ".join(n.upper() for n in self.names_none))
        return "a GPU where " + " and ".join(parts) if parts else "any GPU"


_SMALL = Tier(0, (), (), 2048, 256)  # "TODO(woosuk): Tune the default values for other hardware"
# `vllm serve` (UsageContext.OPENAI_API_SERVER) column of each release's table; the first tier
# that takes the GPU applies. vllm/engine/arg_utils.py: _override_v1_engine_args (0.6.5-0.7.3),
# _set_default_args_v1 (0.8.0-0.10.2), _set_default_args (0.11.0), get_batch_defaults (0.11.1+).
V1_TIERS: dict[str, tuple[Tier, ...]] = {
    # 0.6.5-0.6.6.post1: `OPENAI_API_SERVER: 2048`; max_num_seqs 1024 in __post_init__
    "flat": (Tier(0, (), (), 2048, 1024),),
    # 0.7.0-0.8.3: `if "h100" in device_name or "h200" in device_name`; `default_max_num_seqs =
    # 1024` (0.8.x) or __post_init__'s 1024 (0.7.x) on every GPU
    "name": (Tier(0, ("h100", "h200"), (), 8192, 1024), Tier(0, (), (), 2048, 1024)),
    # 0.8.4: the same names; `default_max_num_seqs = 256` for the others
    "name-256": (Tier(0, ("h100", "h200"), (), 8192, 1024), _SMALL),
    # 0.8.5: `if device_memory >= 70 * GiB_bytes` ("For GPUs like H100 and MI300x")
    "memory": (Tier(70 * GIB, (), (), 8192, 1024), _SMALL),
    # 0.9.0-0.27.1: `... and "a100" not in device_name` (A100s lose throughput, PR #17885)
    "memory-not-a100": (Tier(70 * GIB, (), ("a100",), 8192, 1024), _SMALL),
    # 0.28.0-0.33.0: `if device_memory >= 160 * GiB_bytes` first ("B200/B300"): 16384 for the
    # server too (0.33.0 also keeps GB10, capability 12.1, on the small tier: no catalog GPU)
    "tiers-160": (
        Tier(160 * GIB, (), (), 16384, 1024),
        Tier(70 * GIB, (), ("a100",), 8192, 1024),
        _SMALL,
    ),
}


@dataclass(frozen=True)
class Release:
    """A range of vLLM releases whose `vllm serve` defaults agree, and the source they come from."""

    first: tuple[int, ...]  # the first release of the range
    read: str  # the releases read that agree
    engine: str  # "V0" or "V1": what runs when VLLM_USE_V1 is not set
    long_context_chunking: bool  # V0: chunked prefill on by default above 32K tokens
    v0_chunked_budget: int  # V0: max_num_batched_tokens when chunked prefill is on
    v1_tiers: str  # V1: a key of V1_TIERS (V1 opt-in before 0.8.0)
    v1_forces_chunking: bool  # V1 sets enable_chunked_prefill = True whatever is given
    v1_clamps_seqs: bool  # a default max_num_seqs is min(default, max_num_batched_tokens)
    v1_caps_budget: bool  # a default budget is min(budget, max_num_seqs x max_model_len)
    gpu_memory_utilization: float
    block_size: int
    async_scheduling: bool | None  # None: no such option
    cuda_graphs: str
    source: str  # the files read, and what in them

    @property
    def citation(self) -> str:
        """The files, and the releases read (with the wheel's commit where it names one)."""
        read = self.read.split()
        ends = [f"v{v}" + (f" ({COMMITS[v]})" if v in COMMITS else "") for v in (read[0], read[-1])]
        span = ends[0] if len(read) == 1 else f"{ends[0]} to {ends[1]}"
        return f"{self.source} @ {span}"


# The commit each wheel's vllm/_version.py records (wheels before 0.10.1 record none).
COMMITS = {
    "0.10.1": "aab549870", "0.10.1.1": "1da94e673", "0.10.2": "26b999c71", "0.11.0": "f71952c1c",
    "0.11.1": "439368496", "0.13.0": "72506c983", "0.14.0": "b17039bcc", "0.15.1": "1892993bc",
    "0.19.1": "b1388b1fb", "0.20.0": "b8160878f", "0.27.1": "6e448d0ea", "0.28.0": "2cf0a6915",
    "0.33.0": "4ba787ec9", "0.34.0": "62d4bc3c7",
}  # fmt: skip

_ARGS = "vllm/engine/arg_utils.py"
_V0_GRAPHS = "CUDA graphs for decode batches (--enforce-eager off)"
_V1_PIECEWISE = "piecewise CUDA graphs (--enforce-eager off; attention outside the graphs)"
_V1_FULL = "full and piecewise CUDA graphs (--enforce-eager off; full graphs for pure decode)"
# What each row's files say, in the words of the source; a row names the ones it read.
_V0_BUDGET = "vllm/config.py SchedulerConfig (budget {} chunked, else max(max_model_len, 2048))"
_LONG = "`use_long_context = max_model_len > 32768`: chunked prefill on"
_V0_ARGS = (f"{_ARGS} EngineArgs (max_num_seqs 256, block_size 16, gpu_memory_utilization 0.90, "
            "enable_prefix_caching False)")  # fmt: skip
_V05_ARGS = (f"{_ARGS} EngineArgs (max_num_seqs 256 in V0, 1024 in V1; prefix caching as "
             "VLLM_USE_V1; gpu_memory_utilization 0.90) and create_engine_config "
             f"({_LONG}), vllm/platforms/cuda.py (block_size 16)")  # fmt: skip
_V1_GRAPH_SRC = "vllm/config.py VllmConfig (level PIECEWISE, use_cudagraph)"

RELEASES: tuple[Release, ...] = (
    Release((0, 5, 0), "0.5.0 0.5.1 0.5.2", "V0", False, 512, "flat", True, False, False, 0.9,
            16, None, _V0_GRAPHS,
            f"{_V0_ARGS} and create_engine_config (chunked prefill None: off), "
            + _V0_BUDGET.format(512)),
    Release((0, 5, 3), "0.5.3 0.5.4 0.5.5 0.6.0", "V0", True, 512, "flat", True, False, False,
            0.9, 16, None, _V0_GRAPHS,
            f"{_V0_ARGS} and create_engine_config ({_LONG} unless prefix caching, LoRA, a "
            f"sliding window or speculative decoding), " + _V0_BUDGET.format(512)),
    Release((0, 6, 1), "0.6.1 0.6.2 0.6.3 0.6.3.post1 0.6.4 0.6.4.post1", "V0", True, 512, "flat",
            True, False, False, 0.9, 16, None, _V0_GRAPHS,
            f"{_V0_ARGS} and create_engine_config ({_LONG} unless LoRA, a sliding window or "
            f"speculative decoding), " + _V0_BUDGET.format(512)),
    Release((0, 6, 5), "0.6.5 0.6.6 0.6.6.post1", "V0", True, 2048, "flat", True, False, False,
            0.9, 16, None, _V0_GRAPHS,
            f"vllm/envs.py (VLLM_USE_V1 default 0), {_V05_ARGS}, "
            + _V0_BUDGET.format("2048 ('a balance between ITL and TTFT')")),
    Release((0, 7, 0), "0.7.0 0.7.1 0.7.2 0.7.3", "V0", True, 2048, "name", True, False, False,
            0.9, 16, None, _V0_GRAPHS,
            f"vllm/envs.py (VLLM_USE_V1 default 0), {_V05_ARGS}, " + _V0_BUDGET.format(2048)
            + f"; V1 opt-in: {_ARGS} _override_v1_engine_args (8192 on H100/H200 by name)"),
    Release((0, 8, 0), "0.8.0 0.8.1 0.8.2 0.8.3", "V1", True, 2048, "name", True, False, False,
            0.9, 16, None, _V1_PIECEWISE,
            f"vllm/envs.py (VLLM_USE_V1 default 1), {_ARGS} _set_default_args_v1 (chunked "
            "prefill and prefix caching on; 8192 on H100/H200 by name; max_num_seqs 1024) and "
            "EngineArgs (gpu_memory_utilization 0.90), vllm/platforms/cuda.py (block_size 16), "
            + _V1_GRAPH_SRC),
    Release((0, 8, 4), "0.8.4", "V1", True, 2048, "name-256", True, False, False, 0.9, 16, None,
            _V1_PIECEWISE,
            f"{_ARGS} _set_default_args_v1 (max_num_seqs 256 off H100/H200), EngineArgs, "
            f"vllm/platforms/cuda.py, {_V1_GRAPH_SRC}"),
    Release((0, 8, 5), "0.8.5 0.8.5.post1", "V1", True, 2048, "memory", True, False, False, 0.9,
            16, None, _V1_PIECEWISE,
            f"{_ARGS} _set_default_args_v1 (`device_memory >= 70 * GiB_bytes`), vllm/config.py "
            f"CacheConfig (gpu_memory_utilization 0.9), vllm/platforms/cuda.py, {_V1_GRAPH_SRC}"),
    Release((0, 9, 0), "0.9.0 0.9.0.1 0.9.1 0.9.2", "V1", True, 2048, "memory-not-a100", True,
            False, False, 0.9, 16, None, _V1_PIECEWISE,
            f"{_ARGS} _set_default_args_v1 (`and \"a100\" not in device_name`), vllm/config.py "
            f"CacheConfig, vllm/platforms/cuda.py, {_V1_GRAPH_SRC}"),
    Release((0, 10, 0), "0.10.0", "V1", True, 2048, "memory-not-a100", True, False, False, 0.9,
            16, False, _V1_PIECEWISE,
            f"{_ARGS} _set_default_args_v1, vllm/config.py CacheConfig and SchedulerConfig "
            f"(async_scheduling False: --async-scheduling is new), vllm/platforms/cuda.py, "
            + _V1_GRAPH_SRC),
    Release((0, 10, 1), "0.10.1 0.10.1.1 0.10.2", "V1", True, 2048, "memory-not-a100", True,
            True, False, 0.9, 16, False, _V1_PIECEWISE,
            f"{_ARGS} _set_default_args_v1 (`min(default_max_num_seqs[usage_context], "
            "self.max_num_batched_tokens or sys.maxsize)`), vllm/config/cache.py, "
            "vllm/config/scheduler.py (async_scheduling False), vllm/platforms/cuda.py, "
            "vllm/config/__init__.py (cudagraph_mode PIECEWISE)"),
    Release((0, 11, 0), "0.11.0", "V1", False, 2048, "memory-not-a100", True, True, False, 0.9,
            16, False, _V1_FULL,
            f"{_ARGS} _set_default_args (V1 only: vllm/core/scheduler.py is gone), "
            "vllm/config/cache.py, vllm/config/scheduler.py, vllm/platforms/cuda.py, "
            "vllm/config/__init__.py (cudagraph_mode FULL_AND_PIECEWISE)"),
    Release((0, 11, 1), "0.11.1 0.11.2 0.12.0 0.13.0", "V1", False, 2048, "memory-not-a100",
            False, True, True, 0.9, 16, False, _V1_FULL,
            f"{_ARGS} get_batch_defaults and the defaults setter (a given chunked prefill is "
            "kept; `min(self.max_num_seqs * model_config.max_model_len, ...)`), "
            "vllm/config/cache.py, vllm/config/scheduler.py, vllm/platforms/cuda.py"),
    Release((0, 14, 0), "0.14.0 0.15.1 0.16.0 0.17.0 0.18.0 0.19.0 0.19.1", "V1", False, 2048,
            "memory-not-a100", False, True, True, 0.9, 16, True, _V1_FULL,
            f"{_ARGS} get_batch_defaults, vllm/config/cache.py, vllm/config/scheduler.py "
            "(async_scheduling None) and vllm/config/vllm.py (None: on unless pipeline "
            "parallelism, non-EAGLE speculative decoding or the ray executor), "
            "vllm/platforms/cuda.py (block_size 16; from 0.18.0 vllm/config/cache.py "
            "DEFAULT_BLOCK_SIZE)"),
    Release((0, 20, 0), "0.20.0 0.21.0 0.22.0 0.23.0 0.24.0 0.25.0 0.26.0 0.27.0 0.27.1", "V1",
            False, 2048, "memory-not-a100", False, True, True, 0.92, 16, True, _V1_FULL,
            f"{_ARGS} get_batch_defaults, vllm/config/cache.py (gpu_memory_utilization "
            "Field(default=0.92), DEFAULT_BLOCK_SIZE 16), vllm/config/vllm.py (async)"),
    Release((0, 28, 0), "0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0", "V1", False, 2048,
            "tiers-160", False, True, True, 0.92, 16, True, _V1_FULL,
            f"{_ARGS} get_batch_defaults (`device_memory >= 160 * GiB_bytes` first: 16384 for "
            "`vllm serve` too), vllm/config/cache.py, vllm/config/vllm.py"),
)  # fmt: skip
FIRST_KNOWN = RELEASES[0].first
# 0.34.0 sizes the KV cache from measured free memory by default (the "extensible KV cache",
# gpu_memory_utilization None: 1.0) in blocks of 64 (vllm/config/cache.py @ v0.34.0,
# 62d4bc3c7), a memory model itlkit does not have: 0.34 and later are unknown.
FIRST_UNKNOWN = (0, 34)
KNOWN_RANGE = "0.5.0 to 0.33.x"

# A bare engine name reads as one release: V0 as the last release it was the default in, V1 as
# the release of itlkit's memory research (docs/research/gpu-memory-as-vllm-sees-it.md).
ENGINE_RELEASES = {"V0": (0, 7, 3), "V1": (0, 10, 1, 1)}


# The releases whose runs here show the API server's serial intake (`sim.intake`): vLLM 0.5.4,
# 0.6.3, 0.8.3 and 0.10.1.1 (bursts of up to 2,000 prompts on four sites). The vLLM 0.15.1 runs
# show none: taking their prompts in at that cost, the calibration unchanged, moved their median
# TTFT error from 2.4 to 16.1%. Releases from 0.11 on are not charged it; none of 0.11-0.14 is
# measured here.
SERIAL_INTAKE_BEFORE = (0, 11)


def intake_seconds_per_prompt_token(version: VllmVersion | None) -> float:
    """The intake cost `SchedulerConfig` takes for this release (0: not simulated)."""
    if version is None or version.release >= SERIAL_INTAKE_BEFORE:
        return 0.0
    return INTAKE_SECONDS_PER_PROMPT_TOKEN


@dataclass(frozen=True)
class VllmVersion:
    """A vLLM release (`0.10.1.1`, `v0.6.3`, `0.15`), or a bare engine (`V0`, `V1`)."""

    text: str  # as given
    release: tuple[int, ...]  # the release whose defaults apply
    engine_only: bool = False  # "V0"/"V1" named no release
    build: str = ""  # how a pre-release, development or local build was read (`_build_note`)

    @property
    def label(self) -> str:
        dotted = format_release(self.release)
        if self.engine_only:
            return f"{self.text} (read as vLLM {dotted})"
        if self.text.lstrip("vV") != dotted:
            build = f": {self.build}" if self.build else ""
            return f"vLLM {dotted} (given as {self.text!r}{build})"
        return f"vLLM {dotted}"

    @property
    def row(self) -> Release:
        return release_row(self.release)

    @property
    def engine(self) -> str:
        return self.row.engine


_MOST_RELEASE_PARTS = 4  # 0.10.1.1


def parse_vllm_version(text) -> VllmVersion:
    """`0.10.1.1`, `v0.6.3`, `0.8.5.post1`, `0.15` (read as 0.15.0), `V0` or `V1`, and what
    `vllm --version` prints for other builds (PEP 440, read with `packaging`): `0.11.0rc1`,
    `0.11.1.dev5+g2aeac4b`, `0.10.1.1+cu126` take the release they name (`_build_note` says
    so). ConfigError (without the field's name, which the caller adds) for anything else or an
    unknown release."""
    if not isinstance(text, str):
        raise ConfigError(
            f"must be a vLLM version string such as '0.10.1.1' or 'V1', got {text!r:.60}"
        )
    given = text.strip()
    if given.upper() in ENGINE_RELEASES:
        return VllmVersion(given.upper(), ENGINE_RELEASES[given.upper()], engine_only=True)
    parsed = _pep440(given)
    if parsed is None:
        raise ConfigError(
            f"{given[:40]!r} is not a vLLM version: give a release such as '0.10.1.1', "
            f"'v0.6.3' or '0.15', or 'V0' / 'V1' (itlkit knows {KNOWN_RANGE})"
        )
    release = parsed.release + (0,) * (3 - len(parsed.release))
    if release < FIRST_KNOWN:
        raise ConfigError(
            f"{given[:40]!r}: itlkit knows the defaults of vLLM {KNOWN_RANGE}, V0 and V1"
        )
    if release >= FIRST_UNKNOWN:
        raise ConfigError(
            f"{given[:40]!r}: itlkit knows the defaults of vLLM {KNOWN_RANGE}, V0 and V1 (from "
            "0.34.0 vLLM sizes its KV cache from measured free memory, which itlkit does not model)"
        )
    return VllmVersion(given, release, build=_build_note(parsed, format_release(release)))


def _pep440(text: str) -> Version | None:
    """The version `text` spells under PEP 440 (a leading 'v' allowed), None where it spells
    none or more than four release parts, an epoch or a part over 9999."""
    try:
        parsed = Version(text)
    except InvalidVersion:
        return None
    parts = parsed.release
    if parsed.epoch or len(parts) < 2 or len(parts) > _MOST_RELEASE_PARTS or max(parts) > 9999:
        return None
    return parsed


def _build_note(parsed: Version, dotted: str) -> str:
    """How a build other than a release was read: a release candidate (or alpha, beta) and a
    development build take the defaults of the release they name, which such a build may not
    have yet (the label says so, so that the assumption is printed); a local label (`+cu126`,
    `+g2aeac4b`) names the build, not the release."""
    notes = []
    if parsed.pre is not None:
        notes.append(f"a pre-release of {dotted}, read as {dotted}")
    elif parsed.dev is not None:
        notes.append(f"a development build toward {dotted}, read as {dotted}")
    if parsed.local:
        notes.append(f"build label '+{parsed.local}' left aside")
    return "; ".join(notes)


def release_row(release: tuple[int, ...]) -> Release:
    """The row of `RELEASES` that holds `release` (a known one)."""
    return [row for row in RELEASES if row.first <= release][-1]


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings a server ran with: the ones given, and its version's defaults for the
    rest; `assumptions` says, one line each, what was taken and why."""

    version: VllmVersion | None
    engine: str
    max_num_batched_tokens: int
    max_num_seqs: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    block_size: int
    gpu_memory_utilization: float
    async_scheduling: bool | None
    cuda_graphs: str
    assumptions: tuple[str, ...]

    @property
    def scheduler_fields(self) -> dict:
        """The `SchedulerConfig` fields these settings fix."""
        return {
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "enable_chunked_prefill": self.enable_chunked_prefill,
            "prefill_only_steps": self.engine == "V0" and not self.enable_chunked_prefill,
            "enable_prefix_caching": self.enable_prefix_caching,
            "admission_watermark": admission_watermark(self.engine),
            "intake_seconds_per_prompt_token": intake_seconds_per_prompt_token(self.version),
            "async_scheduling": bool(self.async_scheduling),
        }

    def scheduler_config(self, **rest) -> SchedulerConfig:
        return SchedulerConfig(**self.scheduler_fields, **rest)


# itlkit's engine when no version is named: V1 `vllm serve` on a GPU of the 70 GiB tier, as the
# simulator has always run (SchedulerConfig's defaults), whatever the GPU.
ITLKIT_DEFAULTS = {
    "max_num_batched_tokens": SchedulerConfig.max_num_batched_tokens,
    "max_num_seqs": SchedulerConfig.max_num_seqs,
    "enable_chunked_prefill": SchedulerConfig.enable_chunked_prefill,
    "enable_prefix_caching": True,
    "block_size": 16,
    "gpu_memory_utilization": 0.9,
}


def engine_defaults(
    version: VllmVersion | str | None,
    *,
    gpu_memory_bytes: float,
    gpu_name: str = "",
    max_model_len: int,
    given: Mapping[str, object] | None = None,
    async_scheduling: bool | None = None,
) -> EngineSettings:
    """The settings `vllm serve` of `version` runs with on this GPU (`gpu_memory_bytes`: the total
    CUDA reports, `gpu_name`: the device's name) at this `max_model_len`, where `given` (vLLM
    names, `SETTINGS`) does not set them; vLLM's start-up logic as RELEASES cites it.
    `async_scheduling`: the server's --async-scheduling where known (None: the release's
    default), which the assumptions then state as given.

    With no version: itlkit's own defaults (`ITLKIT_DEFAULTS`), whatever the GPU. SettingError
    (naming the setting) where vLLM would refuse to start: a default max_num_seqs above a given
    budget in releases that do not clamp it, --async-scheduling before the option existed.
    """
    given = {k: v for k, v in (given or {}).items() if v is not None}
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ValueError(f"engine_defaults: unknown settings {unknown}; known: {SETTINGS}")
    if version is None:
        return _itlkit_defaults(given, async_scheduling)
    if isinstance(version, str):
        version = parse_vllm_version(version)
    row = version.row
    if async_scheduling and row.async_scheduling is None:
        raise SettingError(f"{version.label} has no --async-scheduling (vLLM V1 from 0.10.0)",
                           setting="async_scheduling", state="is true")  # fmt: skip
    said = [f"{version.label}: the {row.engine} engine, its default; the defaults below are "
            f"read in {row.citation}"]  # fmt: skip
    value = dict(given)

    def take(key: str, default, why: str) -> None:
        if key not in given:
            value[key] = default
            said.append(f"{key} {shown_setting(default)}: {why}")

    name = f"vLLM {format_release(version.release)}"
    if row.engine == "V0":
        _v0(row, name, value, take, max_model_len=max_model_len)
    else:
        _v1(row, name, value, given, take, said, gpu_memory_bytes=gpu_memory_bytes,
            gpu_name=gpu_name, max_model_len=max_model_len)  # fmt: skip
    take("block_size", row.block_size, f"{name}'s default on CUDA")
    take("gpu_memory_utilization", row.gpu_memory_utilization, f"{name}'s default")
    _refuse_more_seqs_than_budget(value, name)
    said += _behaviour_lines(row, name, value, async_scheduling)
    if intake_seconds_per_prompt_token(version):
        said.append(
            f"{name}'s API server tokenizes prompts one at a time: each reaches the engine after "
            f"those sent before it, at {INTAKE_SECONDS_PER_PROMPT_TOKEN * 1e6:g} us per prompt "
            "token (sim.intake; a closed loop's at their send)"
        )
    return EngineSettings(version=version, engine=row.engine, **{k: value[k] for k in SETTINGS},
                          async_scheduling=row.async_scheduling if async_scheduling is None
                          else async_scheduling, cuda_graphs=row.cuda_graphs,
                          assumptions=tuple(said))  # fmt: skip


def _v0(row: Release, name: str, value: dict, take, *, max_model_len: int) -> None:
    """V0's chunked prefill (off unless the context is long, where the release chunks it), its
    budget with and without it, max_num_seqs and prefix caching (off)."""
    long = max_model_len > V0_LONG_CONTEXT_TOKENS and row.long_context_chunking
    rule = (
        f"above {V0_LONG_CONTEXT_TOKENS:,} tokens of max_model_len ({max_model_len:,})"
        if long
        else f"at max_model_len {max_model_len:,}"
        + (f" (not above {V0_LONG_CONTEXT_TOKENS:,})" if row.long_context_chunking else "")
    )
    take("enable_chunked_prefill", long, f"{name}'s V0 default {rule}")
    if value["enable_chunked_prefill"]:
        take("max_num_batched_tokens", row.v0_chunked_budget,
             f"{name}'s V0 budget with chunked prefill")  # fmt: skip
    else:
        budget = max(max_model_len, V0_UNCHUNKED_MIN_BUDGET)
        take("max_num_batched_tokens", budget, f"{name}'s V0 budget without chunked prefill, "
             f"max(max_model_len, {V0_UNCHUNKED_MIN_BUDGET:,})")  # fmt: skip
    take("max_num_seqs", V0_MAX_NUM_SEQS, f"{name}'s V0 default")
    take("enable_prefix_caching", False, f"{name}'s V0 default (off)")


def _refuse_more_seqs_than_budget(value: dict, name: str) -> None:
    """vLLM refuses to start with max_num_seqs above max_num_batched_tokens (SchedulerConfig's
    check in vllm/config.py), as a release that does not clamp its default does."""
    if value["max_num_seqs"] > value["max_num_batched_tokens"]:
        raise SettingError(
            f"max_num_seqs {value['max_num_seqs']:,} (the default of {name}) exceeds "
            f"max_num_batched_tokens {value['max_num_batched_tokens']:,}; {name} refuses to "
            "start then (SchedulerConfig's check in vllm/config.py): give max_num_seqs",
            setting="max_num_seqs",
            state="is needed",
        )


def _v1(row, name, value, given, take, said, *, gpu_memory_bytes, gpu_name, max_model_len):
    """V1's chunked prefill, prefix caching and batch defaults (`V1_TIERS`)."""
    if row.v1_forces_chunking and given.get("enable_chunked_prefill") is False:
        value["enable_chunked_prefill"] = True
        said.append(f"enable_chunked_prefill on: {name}'s V1 engine turns it on whatever is given")
    take("enable_chunked_prefill", True, f"{name}'s V1 default")
    take("enable_prefix_caching", True, f"{name}'s V1 default")
    tier = next(t for t in V1_TIERS[row.v1_tiers]
                if t.takes(gpu_memory_bytes=gpu_memory_bytes, gpu_name=gpu_name))  # fmt: skip
    gpu = f"{gpu_name or 'the GPU'} (CUDA total {gpu_memory_bytes / GIB:.1f} GiB)"
    where = f"{name}'s `vllm serve` default on {tier.describe()}, as {gpu}"
    budget = tier.max_num_batched_tokens
    if "max_num_batched_tokens" not in given:
        why = where
        if not value["enable_chunked_prefill"]:
            budget = max(max_model_len, budget)
            why += f"; without chunked prefill at least max_model_len ({max_model_len:,})"
        seqs = given.get("max_num_seqs", tier.max_num_seqs)
        if row.v1_caps_budget and seqs * max_model_len < budget:
            budget = seqs * max_model_len
            why += f"; at most max_num_seqs x max_model_len ({seqs:,} x {max_model_len:,})"
        take("max_num_batched_tokens", budget, why)
    seqs = tier.max_num_seqs
    why = where
    if row.v1_clamps_seqs and value["max_num_batched_tokens"] < seqs:
        seqs = value["max_num_batched_tokens"]
        why += ", at most max_num_batched_tokens"
    take("max_num_seqs", seqs, why)


def _behaviour_lines(row: Release, name: str, value: dict, given_async: bool | None) -> list[str]:
    """What the version does that the settings do not say: the step's order and the host side
    (`given_async`: the server's --async-scheduling, where known)."""
    lines = []
    if row.engine == "V0" and not value["enable_chunked_prefill"]:
        lines.append(
            f"{name}'s V0 scheduler without chunked prefill runs arriving prompts in steps of "
            "their own while the decodes wait (vllm/core/scheduler.py _schedule_default); so does "
            "itlkit's engine (prefill-only steps)"
        )
    if given_async is not None:
        host = f"--async-scheduling {'on' if given_async else 'off'} (the server's)"
    elif row.async_scheduling is None:
        host = "no --async-scheduling yet"
    else:
        on = "on (unless pipeline parallel)" if row.async_scheduling else "off"
        host = f"--async-scheduling {on}"
    lines.append(
        f"{name} runs {row.cuda_graphs}, {host}: itlkit's step time does not depend on them "
        "(the deployment's host overhead, or a calibration, carries the host's time per step)"
    )
    if given_async if given_async is not None else row.async_scheduling:
        lines.append(
            "with --async-scheduling each step is scheduled while the one before it runs: a "
            "request that arrives during a step joins the step after next, in itlkit's engine "
            "too (vllm/v1/engine/core.py step_with_batch_queue)"
        )
    return lines


def _itlkit_defaults(given: dict, async_scheduling: bool | None = None) -> EngineSettings:
    """itlkit's defaults, unchanged since before versions: a budget of 8,192, max_num_seqs
    min(1,024, budget), chunked prefill on, whatever the GPU."""
    value = dict(given)
    said = [
        "no vLLM version given: itlkit's defaults, those of V1 `vllm serve` on a GPU of at "
        "least 70 GiB that is not an A100 (vLLM 0.10.1 to 0.19.x), whatever the GPU; the API "
        "server's serial intake is not simulated (a release up to 0.10 named takes it), nor "
        "--async-scheduling (a release from 0.14 named takes it: a request arriving during a "
        "step then joins the step after next)"
    ]
    for key in SETTINGS:
        if key in given:
            continue
        default = ITLKIT_DEFAULTS[key]
        if key == "max_num_seqs":
            default = min(default, value["max_num_batched_tokens"])
        value[key] = default
        said.append(f"{key} {shown_setting(default)} (itlkit's default)")
    if async_scheduling is not None:
        said.append(f"--async-scheduling {'on' if async_scheduling else 'off'} (given)")
    return EngineSettings(version=None, engine="V1", **{k: value[k] for k in SETTINGS},
                          async_scheduling=async_scheduling, cuda_graphs=_V1_PIECEWISE,
                          assumptions=tuple(said))  # fmt: skip


def shown_setting(value) -> str:
    """A setting's value as an `assumed:` line shows it (on/off, 8,192, 0.9)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:g}"
