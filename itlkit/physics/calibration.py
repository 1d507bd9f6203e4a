"""The calibrated constants (`CALIBRATION.json`) and the terms they switch on.

Each constant is a named term of the step formula (`physics.roofline.StepCoefficients`) or of the
engine (`sim.engine`, `calibration.predict`); without a calibration every one is at its
uncalibrated value and itlkit is the plain roofline model of the reference analysis:

* `efficiency`: the share of the roofline's GPU time a real step attains (weights, KV, matmul
  and all-reduce bytes all divide by it). Uncalibrated: 1.
* `host_seconds_per_step`: CPU time of every step that the GPU does not hide (the scheduler,
  input preparation, launching the CUDA graph). Uncalibrated: 0.
* `host_seconds_per_sequence`: the same per running sequence (sampling, detokenising, output
  processing): the issue measured 47-70 us per added sequence against the roofline's 39-49 us,
  nearly the same at every TP, so it is host work, not GPU work. Uncalibrated: 0.
* `allreduce_seconds_per_call`: the latency of one tensor-parallel all-reduce (two per layer),
  by interconnect (`nvlink`, `pcie`); the bytes already cost bytes / link bandwidth.
  Uncalibrated: 0.
* `ttft_pipeline_steps` and `ttft_pipeline_seconds`: what a client's TTFT holds beyond the
  engine's first token: the wait for the running step to end, the engine-core / API-server
  hand-offs, tokenisation and the first streamed chunk; in steps (of the step that emitted the
  token) plus seconds. The same delay precedes the last token, so E2E carries it as well and the
  ITL mean (E2E - TTFT) / (tokens - 1) does not. Uncalibrated: 0 and 0.
* `step_model`: `reference` (every parameter through every token at one MFU, all GPU time over
  the efficiency: the reference analysis) or `engine` (`Deployment.as_engine`: what vLLM computes,
  with GEMM efficiency by token count; the efficiency then divides memory and link traffic only).
  Uncalibrated: reference.
* `mfu`: in the engine model, the share of dense peak a large GEMM reaches. Uncalibrated: 0.8.
* `network_bytes_per_second`: what TP's all-reduce bytes move at between nodes (runs whose
  interconnect is `network`). Uncalibrated: 12.5e9 (100 Gb/s Ethernet).
* `pcie_bandwidth_share`: the share of the GPU's datasheet PCIe bandwidth (one direction) that
  TP's all-reduce bytes reach over PCIe (runs whose interconnect is `pcie`). Uncalibrated: 1.
* `groups`: the same constants refitted on the runs of one GPU family (`gpu:a100`, `gpu:h100`,
  ...); a deployment on a family with a group uses its constants (`for_gpu`), any other the
  global ones, and says so (`describe`).
* `step_jitter`: the spread of a step around the formula (the standard deviation of its log; a
  mean-one lognormal factor per step), which makes the per-token ITL tail. Uncalibrated: 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.input_files import read_json_file
from itlkit.physics.hardware import GPUS, achievable_matmul_share
from itlkit.physics.roofline import (
    ENGINE_MFU,
    NETWORK_BYTES_PER_SECOND,
    REFERENCE,
    STEP_MODELS,
    Deployment,
)
from itlkit.units import format_release

FORMAT = "itlkit-calibration/1"
INTERCONNECTS = ("nvlink", "pcie", "network")
# Fields `for_gpu` sets on a calibration it lends, never written to or read from a file.
LENT_ONLY_FIELDS = frozenset({"compute_scale"})
# A lent cell's matmul scale this close to 1 is left out (neither applied nor said).
NEGLIGIBLE_SCALE = 0.005
# The constants a fit may set, with the range a physical value lies in (seconds, or a ratio).
BOUNDS = {
    "efficiency": (0.05, 1.0),
    "host_seconds_per_step": (0.0, 0.05),
    "host_seconds_per_sequence": (0.0, 0.002),
    "allreduce_seconds_per_call": (0.0, 0.005),  # a network between nodes: up to ms
    "ttft_pipeline_steps": (0.0, 10.0),
    "ttft_pipeline_seconds": (0.0, 1.0),
    "step_jitter": (0.0, 1.0),
    "mfu": (0.05, 1.0),
    "network_bytes_per_second": (1e8, 1e12),
    "pcie_bandwidth_share": (0.01, 1.0),
}


@dataclass(frozen=True)
class Calibration:
    """Constants of the terms a real server adds to the roofline (see the module docstring)."""

    efficiency: float = 1.0
    host_seconds_per_step: float = 0.0
    host_seconds_per_sequence: float = 0.0
    allreduce_seconds_per_call: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(INTERCONNECTS, 0.0)
    )
    ttft_pipeline_steps: float = 0.0
    ttft_pipeline_seconds: float = 0.0
    step_jitter: float = 0.0
    step_model: str = REFERENCE
    mfu: float = ENGINE_MFU
    network_bytes_per_second: float = NETWORK_BYTES_PER_SECOND
    pcie_bandwidth_share: float = 1.0
    name: str = "uncalibrated (the roofline model as is)"
    fitted_on: tuple[str, ...] = ()  # run ids (or files) the constants came from
    uncertainty: dict[str, float] = field(default_factory=dict)  # one standard error each
    undetermined: dict[str, str] = field(default_factory=dict)  # constant -> why and what used
    residuals: dict[str, dict[str, float]] = field(default_factory=dict)  # run -> metric -> error
    leave_one_out: dict[str, float] = field(default_factory=dict)  # metric -> median |error|
    groups: dict[str, dict] = field(default_factory=dict)  # `group_keys` key -> GROUP_KEYS values
    group: str = ""  # the group whose constants these are ("": the global fit)
    scope: str = ""  # `for_gpu` on a GPU family the calibration has no group for: how far off
    # what the runs it was fitted on covered: {"model": size classes, "client": client kinds}
    coverage: dict[str, list[str]] = field(default_factory=dict)
    # source -> metric -> median |error| of its runs, predicted by constants fitted without them
    leave_one_source_out: dict[str, dict[str, float]] = field(default_factory=dict)
    # group -> {"runs": its runs, metric: their leave-one-out median |error| under its constants}
    group_leave_one_out: dict[str, dict[str, float]] = field(default_factory=dict)
    # Set by `for_gpu` where another GPU's runs lend the constants (`_scaled`); never fitted,
    # read or written (`LENT_ONLY_FIELDS`).
    compute_scale: float = 1.0

    def __post_init__(self) -> None:
        for key in BOUNDS:
            if key == "allreduce_seconds_per_call":
                continue
            _check(key, getattr(self, key))
        if self.step_model not in STEP_MODELS:
            raise ConfigError(f"calibration: step_model must be one of {', '.join(STEP_MODELS)}, "
                              f"got {self.step_model!r}")  # fmt: skip
        unknown = set(self.allreduce_seconds_per_call) - set(INTERCONNECTS)
        if unknown:
            raise ConfigError(f"allreduce_seconds_per_call: unknown interconnect {sorted(unknown)}")
        for link, value in self.allreduce_seconds_per_call.items():
            _check(f"allreduce_seconds_per_call.{link}", value)

    def for_gpu(self, gpu: str, engine: str = "V1", *, moe: bool = False,
                many_experts: bool = False,
                release: tuple[int, ...] | None = None) -> Calibration:  # fmt: skip
        """The constants for a deployment on `gpu` (a catalog slug) under `engine` (vLLM's "V0"
        or "V1", or "SGLang"), of an MoE model or not (of many small experts or not: `Model.
        many_experts`): the most specific group the calibration has (`group_keys`); on an
        architecture with none, a vLLM V1 deployment takes the V1 cell of the release nearest
        its `release` (none: the newest; `nearest_release_cell`); else the global fit.
        Constants lent by other runs say so in `scope`."""
        keys = group_keys(gpu, engine, moe=moe, many_experts=many_experts)
        apart = engine in ENGINES_APART or any(key in self.groups for key in keys)
        near = None if apart else self.nearest_release_cell(release, moe=moe)
        if near is not None:
            key, version = near
            which = (
                f"the release nearest {format_release(release)} ({version})"
                if release
                else f"the newest release ({version}; none named: a current vLLM assumed)"
            )
            scope = (f"no {keys[0]} runs in it, nor of its architecture: {key}'s constants, vLLM "
                     f"V1 runs of {which} on another architecture")  # fmt: skip
            return self._scaled(replace(self.group_calibration(key), scope=scope), gpu, key)
        for key in keys:
            if key in self.groups:
                found = self.group_calibration(key)
                if key in fit_keys(gpu, engine, moe=moe):
                    return found
                scope = f"no {keys[0]} runs in it: {key}'s constants, " + _lender(key, keys[0])
                own, where = self._own_engine_side(keys, key, release)
                scope += f"; {where}" if where else ""
                return self._scaled(replace(found, scope=scope, **own), gpu, key)
        return replace(self, scope=self._extrapolation(keys[0])) if self.groups else self

    def _scaled(self, lent: Calibration, gpu: str, key: str) -> Calibration:
        """`lent` (group `key`'s constants) with its matmuls scaled to `gpu`: its fitted MFU is a
        share of its own runs' GPUs' datasheet peak, and GPUs reach different shares of theirs
        (`achievable_matmul_share`, measured: 0.87 on an A100 SXM, 0.80 on an H100, 0.51 on an
        MI300X), so a cell lent across GPUs keeps its share of what is achievable. No measure
        for either side (`gpu@<group>` in `coverage`, from `calibrate`): unscaled."""
        lenders = [achievable_matmul_share(g) for g in self.coverage.get(f"gpu@{key}", ())
                   if g in GPUS]  # fmt: skip
        lenders = [share for share in lenders if share is not None]
        own = achievable_matmul_share(gpu) if gpu in GPUS else None
        if own is None or not lenders:
            return lent
        lender = sum(lenders) / len(lenders)
        scale = own / lender
        if abs(scale - 1.0) < NEGLIGIBLE_SCALE:
            return lent
        said = (f"; its matmuls x {scale:.2f}: this GPU's measured achievable BF16 matmul is "
                f"{own:.0%} of its peak, the lending runs' GPUs' {lender:.0%} (MAMF)")  # fmt: skip
        return replace(lent, compute_scale=scale, scope=lent.scope + said)

    def nearest_release_cell(self, release: tuple[int, ...] | None, *, moe: bool = False):
        """(key, release) of the vLLM V1 cell of this model class fitted on the vLLM release
        nearest `release` (`version@<group>` in `coverage`; the smaller (major, minor) distance,
        then the cell of more runs), or None. No release named (explain, plan, the notebooks,
        `simulate` without --vllm-version, whose engine defaults are a current V1's): the
        newest release's cell. The global fit blends every vLLM generation:
        170 runs, 79 of them V0, whose host side and all-reduce are heavier than V1's (vLLM
        0.14.1 serving Qwen3-32B on 8 B200, held out: ITL p50 +88 to +102 % on the global
        constants, -15 to +6 % on vLLM 0.15.1's H100 cell)."""
        newest = max((_minor_index(v) for key, versions in self.coverage.items()
                      if key.startswith("version@") for v in versions), default=None)  # fmt: skip
        if newest is None:
            return None
        target = newest if release is None else _release_index(release)
        best = None
        for key in self.groups:
            if _engine_of(key) != "V1" or key.endswith(f"/{MOE}") != moe:
                continue
            versions = self.coverage.get(f"version@{key}", [])
            if not versions:
                continue
            nearest = min(versions, key=lambda v: abs(_minor_index(v) - target))
            runs = self.group_leave_one_out.get(key, {}).get("runs", 0)
            rank = (abs(_minor_index(nearest) - target), -runs)
            if best is None or rank < best[0]:
                best = (rank, key, nearest)
        return None if best is None else best[1:]

    def _own_engine_side(self, keys: tuple[str, ...], lender: str,
                         release: tuple[int, ...] | None = None) -> tuple[dict, str]:  # fmt: skip
        """The constants a deployment keeps from its own engine when `lender` lends the rest,
        and whence, in words ("" where the lender's are all kept).

        The TTFT pipeline holds what a client's TTFT has beyond the engine's steps: the API
        server, the tokenizer, the first token's way out; each engine has its own (SGLang's
        tokenizer and detokenizer run as processes of their own). Lent by vLLM V0 (a vLLM V1
        MoE deployment: `group_keys`), the host side is V1's too. They come from the nearest
        cell of the deployment's own engine in `keys` on its own architecture, else, for vLLM
        V1, from the V1 dense cell of the release nearest `release` (`nearest_release_cell`),
        else from the global fit (vLLM's runs); an SGLang deployment with no SGLang cell keeps
        the lender's."""
        own = _engine_of(keys[0])
        if _engine_of(lender) == own:
            return {}, ""
        fields = (*HOST_KEYS, *PIPELINE_KEYS) if _engine_of(lender) == "V0" else PIPELINE_KEYS
        what = "the host side and the TTFT pipeline" if fields != PIPELINE_KEYS else (
            "the TTFT pipeline")  # fmt: skip
        home = _architecture_or_family(keys[0])
        same = [k for k in keys if k in self.groups and _engine_of(k) == own
                and _architecture_or_family(k) == home]  # fmt: skip
        near = self.nearest_release_cell(release) if own == "V1" and not same else None
        if same:
            source, where = self.groups[same[0]], f"{same[0]}'s (its own engine's)"
        elif near is not None:
            source, where = self.groups[near[0]], f"{near[0]}'s (vLLM V1 of release {near[1]})"
        elif own != "SGLang":
            source, where = vars(self), "the global fit's (vLLM's runs)"
        else:
            return {}, ""
        return {k: source[k] for k in fields}, f"{what} {where}"

    def for_run(self, run) -> Calibration:
        """`for_gpu` for a real run (`sim.runs.Run`): its GPU, engine and model class."""
        return self.for_model(run.gpu, run.model, run.engine, run.release)

    def for_model(self, gpu: str, model, engine: str = "V1", release=None) -> Calibration:
        """`for_gpu` for `model` (a `physics.model.Model`) served on `gpu` by `engine` (of
        vLLM `release`, a `sim.versions.VllmVersion`, where named)."""
        named = None if release is None or release.engine_only else release.release
        return self.for_gpu(gpu, engine, moe=model.is_moe, many_experts=model.many_experts,
                            release=named)  # fmt: skip

    def group_calibration(self, key: str) -> Calibration:
        """The calibration with group `key`'s constants in force."""
        return replace(self, **_group_values(self.groups[key], key), groups={}, group=key)

    def beyond(self, *, model: str, client: str) -> str:
        """ "" where the runs behind the constants in force (the group's, `model@<group>` and
        `client@<group>` in `coverage`, else the global fit's) covered this model class and
        client; else one clause per thing they did not ("no MoE runs in it, no closed-loop
        clients")."""
        missing = []
        for kind, value, what in (("model", model, "runs"), ("client", client, "clients")):
            covered = self.coverage.get(f"{kind}@{self.group}", self.coverage.get(kind))
            if self.coverage and value not in (covered or []):
                missing.append(f"no {value} {what}")
        return ", ".join(missing) + " in it: expect a larger error" if missing else ""

    def _extrapolation(self, key: str) -> str:
        """What using the global constants for a family without runs is worth, in words."""
        itl = [e["itl_mean_seconds"] for e in self.leave_one_source_out.values()
               if "itl_mean_seconds" in e]  # fmt: skip
        spread = (f"; a source it was not fitted on came out {min(itl):.0%} to {max(itl):.0%} "
                  "off in mean ITL (leave-one-source-out)") if itl else ""  # fmt: skip
        return f"no {key} runs in it: its global constants{spread}"

    def allreduce_for(self, deployment: Deployment) -> float:
        """Per-call all-reduce latency over the deployment's link (NVLink-class, PCIe, network);
        a link the calibration never saw gets its NVLink value (none: 0)."""
        per_call = self.allreduce_seconds_per_call
        return per_call.get(deployment.link_kind, per_call.get("nvlink", 0.0))

    def apply(self, deployment: Deployment) -> Deployment:
        """The deployment with this calibration's host and all-reduce terms and step model
        (the efficiency is the step function's, `step_coefficients(efficiency=...)`)."""
        calibrated = replace(
            deployment,
            host_overhead_seconds=self.host_seconds_per_step,
            host_seconds_per_sequence=self.host_seconds_per_sequence,
            allreduce_latency_seconds=self.allreduce_for(deployment),
            network_bytes_per_second=self.network_bytes_per_second,
            pcie_bandwidth_share=self.pcie_bandwidth_share,
        )
        if self.step_model == REFERENCE:
            return replace(calibrated, mfu=min(1.0, calibrated.mfu * self.compute_scale))
        return calibrated.as_engine(mfu=min(1.0, self.mfu * self.compute_scale))

    @property
    def is_calibrated(self) -> bool:
        return bool(self.fitted_on)

    def describe(self) -> str:
        """One line: which calibration is in force."""
        if not self.is_calibrated:
            return f"calibration: {self.name}"
        n = len(self.fitted_on)
        scope = f", constants of {self.group}" if self.group else ""
        scope += self._own_error_text()
        scope += f"; {self.scope}" if self.scope else ""
        return f"calibration {self.name!r}: fitted on {n} run{'' if n == 1 else 's'}{scope}"

    def own_error(self) -> dict[str, float]:
        """Constants used on their own group's GPU, engine and model class: {"runs": the
        group's runs, metric: their leave-one-out median |error|}; {} for the global fit, a
        group lent to another deployment (its runs are not the borrower's) or a file that does
        not keep them (written before they were)."""
        errors = self.group_leave_one_out.get(self.group, {}) if not self.scope else {}
        return dict(errors) if "runs" in errors and len(errors) > 1 else {}

    def _own_error_text(self) -> str:
        """ " (its 6 runs, each predicted by constants fitted without it, came out mean ITL
        5.2%, ... off at the median)", or "" (`own_error`)."""
        errors = self.own_error()
        parts = [f"{label} {errors[key]:.1%}" for key, label in (
            ("itl_mean_seconds", "mean ITL"), ("ttft_mean_seconds", "mean TTFT"),
            ("e2e_mean_seconds", "mean E2E")) if key in errors]  # fmt: skip
        if not parts:
            return ""
        return (f" (its {errors['runs']:.0f} runs, each predicted by constants fitted without "
                f"it, came out {', '.join(parts)} off at the median)")  # fmt: skip

    def with_values(self, **values) -> Calibration:
        return replace(self, **values)

    def to_json(self) -> dict:
        doc = asdict(self)
        for key in LENT_ONLY_FIELDS:
            doc.pop(key)
        doc["fitted_on"] = list(self.fitted_on)
        return {"format": FORMAT, **doc}


PIPELINE_KEYS = ("ttft_pipeline_steps", "ttft_pipeline_seconds")
HOST_KEYS = ("host_seconds_per_step", "host_seconds_per_sequence")


def _check(key: str, value) -> None:
    low, high = BOUNDS[key.split(".")[0]]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"calibration: {key} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"calibration: {key} = {value:g} is outside [{low:g}, {high:g}]")


GROUP_KEYS = ("efficiency", "mfu", "allreduce_seconds_per_call", "host_seconds_per_step",
              "host_seconds_per_sequence", "ttft_pipeline_steps",
              "ttft_pipeline_seconds", "network_bytes_per_second", "pcie_bandwidth_share",
              "step_model")  # fmt: skip
# Group constants a calibration file written before them may lack, and their value then.
LATER_GROUP_KEYS = {"pcie_bandwidth_share": 1.0}


ENGINES_APART = ("V0", "SGLang")  # engines whose host side differs from vLLM V1's
MOE = "MoE"


# GPU families built on one chip architecture, the nearest first: a family with no runs of its
# own borrows a sibling's cells before the global constants. They share the SMs (CUs), the
# kernels and the host stack, and differ in HBM size and speed, which the step model prices from
# the datasheet (H200: "based on the NVIDIA Hopper architecture", nvidia.com/en-us/data-center/
# h200; H800: Hopper for China; B300: Blackwell Ultra; GB200: two B200 GPUs beside a Grace CPU;
# MI325X: "AMD CDNA 3", as MI300X). Measured on the InferenceX runs, each cell held out and its
# sibling's constants used: B200 3.6%, B300 3.2%, MI300X 10.3%, MI325X 16.6% median error of
# mean ITL, against 16.4%, 19.0%, 41.3% and 48.9% with the global constants.
SIBLINGS = {
    "gpu:h200": ("gpu:h100", "gpu:h800"),
    "gpu:h100": ("gpu:h200", "gpu:h800"),
    "gpu:h800": ("gpu:h100", "gpu:h200"),
    "gpu:b300": ("gpu:b200", "gpu:gb200"),
    "gpu:b200": ("gpu:b300", "gpu:gb200"),
    "gpu:gb200": ("gpu:b200", "gpu:b300"),
    "gpu:mi325x": ("gpu:mi300x",),
    "gpu:mi300x": ("gpu:mi325x",),
}

# Each vendor's data-centre chip architectures, the newest first, with their GPU families (the
# catalog's: B200, B300, GB200 "Blackwell"; H100, H200, H800 Hopper; A100 Ampere; MI355X "AMD
# CDNA 4"; MI300X, MI325X CDNA 3; MI210, MI250X CDNA 2; MI100 CDNA). A vLLM V1 MoE of many small
# experts with no vLLM MoE cell on its own architecture borrows one of the nearest earlier
# architecture (`group_keys`).
LINEAGES = (
    (("Blackwell", ("gpu:b200", "gpu:b300", "gpu:gb200")),
     ("Hopper", ("gpu:h100", "gpu:h200", "gpu:h800")),
     ("Ampere", ("gpu:a100",))),
    (("CDNA 4", ("gpu:mi355x",)),
     ("CDNA 3", ("gpu:mi300x", "gpu:mi325x")),
     ("CDNA 2", ("gpu:mi250x", "gpu:mi210")),
     ("CDNA", ("gpu:mi100",))),
)  # fmt: skip


def architecture_of(family: str) -> str:
    """The chip architecture of a GPU family ("gpu:h200" -> "Hopper"), "" where not listed."""
    return next((name for lineage in LINEAGES for name, families in lineage
                 if family in families), "")  # fmt: skip


def _architecture_or_family(key: str) -> str:
    """The architecture of group `key`'s GPU family, else the family itself (one not listed)."""
    family = key.split("/")[0]
    return architecture_of(family) or family


def earlier_families(family: str) -> tuple[str, ...]:
    """The GPU families of the architectures before `family`'s in its vendor's lineage, the
    nearest architecture first (`LINEAGES`); () for one not listed."""
    own = architecture_of(family)
    for lineage in LINEAGES:
        names = [name for name, _ in lineage]
        if own in names:
            later = lineage[names.index(own) + 1 :]
            return tuple(f for _, families in later for f in families)
    return ()


def group_keys(gpu: str, engine: str = "V1", *, moe: bool = False,
               many_experts: bool = False) -> tuple[str, ...]:  # fmt: skip
    """The calibration groups a deployment may take its constants from, the nearest first.

    A group is a cell of runs: a GPU family, the engine where it is V0 or SGLang, and MoE
    models apart (grouped-expert GEMMs run far from dense peak). First the cells its own kind
    of runs are fitted in (`fit_keys`: its model class, then its engine's dense cell, which an
    MoE cell of too few runs joins: vLLM 0.15's Llama-4-Scout runs on H100 are in `gpu:h100`).
    Then, between vLLM V1 and SGLang, the other's cells on the same GPU family (the same GPU and
    GEMM kernels, a host side of the same design: a scheduler beside the model runner, CUDA
    graphs), its model class first. vLLM V0's host side is heavier (its scheduler and
    detokenizer share the model's process: its constants put a V1 H100 source 43% off in mean
    ITL, 300% in TTFT, held out), so V0 cells are not borrowed whole; but a vLLM V1 MoE
    deployment takes a V0 MoE cell's GPU side (vLLM's fused-MoE kernels) before SGLang's
    cells, with its host side and TTFT pipeline from vLLM V1 (`Calibration.for_gpu`). Held
    out, vLLM 0.14 serving gpt-oss-120b on 8 H200 came out +11 to +19 % in mean TPOT that way,
    -37 to -42 % with SGLang's cell; vLLM 0.10 serving DeepSeek-R1 on 8 MI300X +23 and +6 %,
    against -17 and -27 %. Both are models of many small experts at TP 8 (128 of 2,880 x 2,880
    and 256 of 7,168 x 2,048, split eight ways), as is the V0 cell's DeepSeek-R1; an MoE of
    few wide experts is not: with the H100 cell held out, vLLM 0.15 serving Llama-4-Scout (16
    experts of 5,120 x 8,192) at TP 2 came out +119 and +138 % in mean ITL on the H200's V0 MoE
    cell, about 10 % on SGLang's. So a V0 MoE cell is lent on its own GPU family, and, to an MoE
    of many small experts (`many_experts`), on its sibling families too, before any dense cell:
    vLLM's MoE cells of the architecture first (V1's, then V0's; its own family first), then the
    rest as for any MoE. With no vLLM MoE cell on its own architecture, such an MoE takes
    those of the nearest earlier architecture of its vendor (`LINEAGES`: Blackwell, then Hopper,
    then Ampere), still before any dense or SGLang cell: held out, vLLM 0.14.1 serving
    gpt-oss-120b on 8 B200 came out -11 to -23 % in mean TPOT on the H200's V0 MoE cell, -51 to
    -56 % on the B200's SGLang cell (these runs showed the rule). Then the same on each sibling
    family (`SIBLINGS`: the same chip architecture), the nearest first. vLLM V1 serving an MoE
    on an H200: `gpu:h200/MoE`, `gpu:h200`, `gpu:h200/V0/MoE`, `gpu:h200/SGLang/MoE`,
    `gpu:h200/SGLang`, `gpu:h100/MoE`, `gpu:h100`, ...; serving one of many small experts on an
    H100: `gpu:h100/MoE`,
    `gpu:h100/V0/MoE`, `gpu:h200/MoE`, `gpu:h200/V0/MoE`, `gpu:h800/MoE`, `gpu:h800/V0/MoE`,
    `gpu:a100/MoE`, `gpu:a100/V0/MoE`, `gpu:h100`, ..."""
    family = "gpu:" + gpu.split("-")[0]
    members = (family, *SIBLINGS.get(family, ()))
    keys = []
    if moe and many_experts and engine not in ENGINES_APART:
        for lender in (*members, *earlier_families(family)):
            keys += [_key(lender, e, MOE) for e in ("", "V0")]
    for member in members:
        keys += _family_keys(member, engine, moe=moe, v0_moe=member == family)
    return tuple(dict.fromkeys(keys))


def _family_keys(family: str, engine: str, *, moe: bool, v0_moe: bool) -> list[str]:
    """`group_keys` within one GPU family (`v0_moe`: a V1 MoE deployment may take the family's
    V0 MoE cell's GPU side)."""
    classes = (MOE, "") if moe else ("",)
    own = [_key(family, engine if engine in ENGINES_APART else "", c) for c in classes]
    if engine == "V0":
        return own
    v0 = [_key(family, "V0", MOE)] if moe and v0_moe and engine not in ENGINES_APART else []
    other = "" if engine in ENGINES_APART else "SGLang"
    return own + v0 + [_key(family, other, c) for c in classes]


def _lender(key: str, own: str) -> str:
    """Whose runs a lent group's constants come from, in words."""
    arch, home = architecture_of(key.split("/")[0]), architecture_of(own.split("/")[0])
    if arch and home and arch != home:
        return f"vLLM's MoE runs on an earlier architecture ({arch}; this GPU is {home})"
    sibling = key.split("/")[0] != own.split("/")[0]
    engine = _engine_of(key) != _engine_of(own)
    if sibling and engine:
        return "another engine's runs on a GPU of the same architecture"
    if sibling:
        return "runs on a GPU of the same architecture"
    return "another engine's runs on the same GPU family"


def _is_sglang(key: str) -> bool:
    """Whether group `key` is a cell of SGLang runs (`gpu:h200/SGLang/MoE`)."""
    return "SGLang" in key.split("/")


def _minor_index(version: str) -> int:
    """A release "0.15.1" as one number of minor releases (major x 1000 + minor)."""
    return _release_index(tuple(int(part) for part in version.split(".")[:2]))


def _release_index(release: tuple[int, ...]) -> int:
    """A release (0, 15, 1) as one number of minor releases (major x 1000 + minor)."""
    major, minor = release[:2]
    return major * 1000 + minor


def _engine_of(key: str) -> str:
    """The engine of group `key`'s runs: "SGLang", "V0" or vLLM's "V1"."""
    return next((part for part in key.split("/") if part in ENGINES_APART), "V1")


def fit_keys(gpu: str, engine: str = "V1", *, moe: bool = False) -> tuple[str, ...]:
    """The cells a run may be fitted in, the nearest first: its own (GPU family, engine where
    V0 or SGLang, MoE apart), then its engine's dense cell on the family, where the own cell has
    too few runs (`calibration.groups.by_group`)."""
    family = "gpu:" + gpu.split("-")[0]
    own = engine if engine in ENGINES_APART else ""
    return tuple(_key(family, own, c) for c in ((MOE, "") if moe else ("",)))


def _key(family: str, engine: str, model_class: str) -> str:
    return "/".join(part for part in (family, engine, model_class) if part)


def _group_values(values, key: str) -> dict:
    """A group's constants, checked: every GROUP_KEYS entry and nothing else."""
    if isinstance(values, dict):
        values = {**{k: v for k, v in LATER_GROUP_KEYS.items() if k not in values}, **values}
    if not isinstance(values, dict) or set(values) != set(GROUP_KEYS):
        raise ConfigError(f"calibration: groups.{key} must hold exactly {', '.join(GROUP_KEYS)}")
    return dict(values)


UNCALIBRATED = Calibration()


def calibration_from_json(doc, *, source: str = "<calibration>") -> Calibration:
    """A calibration from its JSON document; errors name the file and the key."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError(
            f"{source}: not a calibration file (format must be {FORMAT!r}, got {found!r})"
        )
    known = set(Calibration.__dataclass_fields__) - LENT_ONLY_FIELDS
    extra = sorted(set(doc) - known - {"format"})
    if extra:
        raise ConfigError(f"{source}: unknown keys {', '.join(extra)}")
    values = {k: v for k, v in doc.items() if k in known}
    _check_metadata(values, source)
    if "fitted_on" in values:
        values["fitted_on"] = tuple(values["fitted_on"])
    if not isinstance(values.get("allreduce_seconds_per_call", {}), dict):
        raise ConfigError(f"{source}: allreduce_seconds_per_call must be an object by interconnect")
    try:
        calibration = Calibration(**values)
        for key in calibration.groups:  # each group must make a valid calibration too
            calibration.group_calibration(key)
        return calibration
    except (TypeError, ConfigError) as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _check_metadata(values: dict, source: str) -> None:
    """The descriptive fields must have the shapes `itlkit calibrate` writes."""

    def number(v) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def text(v) -> bool:
        return isinstance(v, str)

    def mapping(of):
        return lambda v: isinstance(v, dict) and all(of(x) for x in v.values())

    shapes = {
        "name": text,
        "fitted_on": lambda v: isinstance(v, list | tuple) and all(map(text, v)),
        "uncertainty": mapping(number),
        "undetermined": mapping(text),
        "residuals": mapping(mapping(number)),
        "leave_one_out": mapping(number),
        "groups": lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),
        "group": text,
        "scope": text,
        "coverage": lambda v: (
            isinstance(v, dict)
            and all(isinstance(x, list) and all(map(text, x)) for x in v.values())
        ),
        "leave_one_source_out": mapping(mapping(number)),
        "group_leave_one_out": mapping(mapping(number)),
    }
    for key, ok in shapes.items():
        if key in values and not ok(values[key]):
            raise ConfigError(f"{source}: {key} has the wrong shape (got {values[key]!r:.60})")


def read_calibration(path) -> Calibration:
    """A `CALIBRATION.json` written by `itlkit calibrate` ('none': the uncalibrated model)."""
    if str(path) == "none":
        return UNCALIBRATED
    doc = read_json_file(path, kind="calibration")
    return calibration_from_json(doc, source=str(path))


BUNDLED = "bundled"


def load_calibration(choice=BUNDLED) -> Calibration:
    """The calibration a `--calibration` names: 'bundled' (or None: the one itlkit ships,
    data/calibration.json), 'none' or a file."""
    if choice in (None, BUNDLED):
        from itlkit.bundled import bundled_path

        return read_calibration(bundled_path("calibration.json"))
    return read_calibration(choice)


def write_calibration(calibration: Calibration, path) -> None:
    """Write `CALIBRATION.json` (missing folders on the way are created, as for exports)."""
    path = Path(path)
    text = json.dumps(calibration.to_json(), indent=2) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:  # a folder at the path, a file where a folder should be, no rights
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"{path}: cannot write the calibration there ({why.lower()})") from None
