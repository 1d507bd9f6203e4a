"""Which deployment served the metrics: what the user stated, what the page says, and what is
assumed, each assumption said in one sentence.

A page names its model (`model_name`, and with it often the weight precision and the TP) and,
through `vllm:cache_config_info`, its KV cache: the cache's dtype and its size, which the GPU's
memory bounds. It never names the GPU. `infer_deployment` is the one path from a page to a
deployment: `itlkit diagnose`, `itlkit calibrate`, the fleet scan and the notebooks call it, so
they judge the same page against the same deployment and say the same "assumed: ..." lines.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from itlkit.physics.gpu_from_kv import gpus_matching, kv_evidence
from itlkit.physics.hardware import get_gpu
from itlkit.physics.model_names import guess_model
from itlkit.physics.roofline import Deployment

DEFAULT_MODEL, DEFAULT_GPU, DEFAULT_PRECISION = "llama-3.1-8b", "h100-sxm", "bf16"
# The GPUs a page that says nothing of its memory may have run on, slowest HBM first.
PLAUSIBLE_GPUS = ("l4", "a10", "l40s", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200")

# vLLM's `cache_dtype` (vllm/config/cache.py, CacheDType, commit 002f10e0): "auto" stores the KV
# cache in the model's dtype, the fp8 names in one byte per value.
_KV_FROM_CACHE_DTYPE = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8",
}  # fmt: skip


@dataclass(frozen=True)
class Stated:
    """What the user said about the deployment; None: read it from the page, or assume."""

    model: str | None = None  # a catalog name or a config.json path
    gpu: str | None = None
    weight_precision: str | None = None
    kv_precision: str | None = None
    tp: int | None = None
    mfu: float = 0.5


@dataclass(frozen=True)
class PageFacts:
    """What a page says about its deployment: the served names and vLLM's cache config."""

    served_names: tuple[str, ...] = ()
    cache_config: Mapping[str, str] | None = None

    @property
    def served_name(self) -> str | None:
        """The one served name, or None (none, or several)."""
        return self.served_names[0] if len(self.served_names) == 1 else None


@dataclass(frozen=True)
class InferredDeployment:
    """The deployment to judge the page against, and how each part of it was found."""

    deployment: Deployment
    assumptions: tuple[str, ...]
    gpu_stated: bool
    gpus: tuple[str, ...] = field(default=PLAUSIBLE_GPUS)  # where it may run (GPU not stated)

    @property
    def assumed_model(self) -> bool:
        """Whether the model is a default, not stated and not on the page."""
        return any(a.startswith("model ") and "pass --model" in a for a in self.assumptions)


def served_model_names(frame) -> list[str]:
    """The model names the ITL rows of a tidy metrics table carry (none: [])."""
    if frame is None:
        return []
    itl = frame[frame["metric"] == "itl"]
    return sorted({str(n) for n in itl["model_name"].unique()} - {""})


def page_facts(served_names=(), paths=()) -> PageFacts:
    """The facts of `served_names` and of the pages among `paths` (files or folders): the
    last `vllm:cache_config_info` they hold."""
    from itlkit.metrics.page_info import cache_config_of_files

    return PageFacts(tuple(served_names), cache_config_of_files(paths) if paths else None)


def infer_deployment(stated: Stated, facts: PageFacts) -> InferredDeployment:
    """The deployment `stated` and the page's `facts` describe; every part not stated is read
    off the page or assumed, and said so (one sentence per part, in the CLI's flag names)."""
    said: list[str] = []
    model, guess = _model(stated, facts, said)
    weights = _weight_precision(stated, guess, model, said)
    kv = _kv_precision(stated, facts, said)
    tp = _tp(stated, facts, said)
    gpu = stated.gpu or DEFAULT_GPU
    deployment = Deployment.create(model=model, gpu=gpu, weight_precision=weights,
                                   kv_precision=kv, tp=tp, mfu=stated.mfu)  # fmt: skip
    if stated.gpu is not None:
        return InferredDeployment(deployment, tuple(said), True, (stated.gpu,))
    said.append(f"GPU {gpu} (vLLM's metrics do not name it; pass --gpu)")
    inferred = InferredDeployment(deployment, tuple(said), False)
    return inferred if inferred.assumed_model else _narrowed_by_kv_cache(inferred, facts)


def _model(stated: Stated, facts: PageFacts, said: list[str]):
    name = facts.served_name
    guess = guess_model(name) if name else None
    if stated.model is not None:
        return stated.model, guess
    if guess is not None:
        said.append(f"model {guess.slug}, {guess.reason}")
        return guess.slug, guess
    why = (f"model_name {name!r} is not in the catalog" if name else
           "the metrics name several models" if facts.served_names else
           "the metrics name no model")  # fmt: skip
    said.append(f"model {DEFAULT_MODEL} ({why}; pass --model NAME or a config.json)")
    return DEFAULT_MODEL, None


def _weight_precision(stated: Stated, guess, model: str, said: list[str]) -> str:
    if stated.weight_precision is not None:
        return stated.weight_precision
    from_name = guess.weight_precision if guess is not None and guess.slug == model else None
    if from_name:
        return from_name  # the model sentence names the suffix it came from
    said.append(f"{DEFAULT_PRECISION} weights (not stated; --weights-precision)")
    return DEFAULT_PRECISION


def _kv_precision(stated: Stated, facts: PageFacts, said: list[str]) -> str:
    if stated.kv_precision is not None:
        return stated.kv_precision
    dtype = (facts.cache_config or {}).get("cache_dtype")
    if dtype in _KV_FROM_CACHE_DTYPE:
        kv = _KV_FROM_CACHE_DTYPE[dtype]
        said.append(f"{kv} KV cache (cache_dtype {dtype!r} in vllm:cache_config_info)")
        return kv
    if dtype == "auto":
        said.append(f"{DEFAULT_PRECISION} KV cache (cache_dtype 'auto' is the model's dtype, "
                    "taken as bf16; --kv-precision)")  # fmt: skip
        return DEFAULT_PRECISION
    why = f"cache_dtype {dtype!r} is not one itlkit models" if dtype else "not on the page"
    said.append(f"{DEFAULT_PRECISION} KV cache ({why}; --kv-precision)")
    return DEFAULT_PRECISION


def _tp(stated: Stated, facts: PageFacts, said: list[str]) -> int:
    if stated.tp is not None:
        return stated.tp
    name = facts.served_name
    tp = tp_from_name(name) if name else None
    said.append(f"TP {tp}, from model_name {name!r}" if tp else
                "TP 1 (the metrics do not state it; pass --tp)")  # fmt: skip
    return tp or 1


def tp_from_name(served_name: str) -> int | None:
    """The tensor-parallel size a served name states (`opt-125m-tp2`, `llama_TP8`), else None."""
    match = re.search(r"(?:^|[-_./])tp[-_]?(\d+)(?=$|[-_./])", served_name, re.IGNORECASE)
    return int(match.group(1)) if match and int(match.group(1)) > 0 else None


def _narrowed_by_kv_cache(inferred: InferredDeployment, facts: PageFacts) -> InferredDeployment:
    """The GPUs the page's KV cache size allows (its memory bounds the card); the first is the
    one judged against, and the GPU sentence says why. Unchanged when the page cannot tell."""
    sizes = _cache_sizes(facts.cache_config or {})
    if sizes is None:
        return inferred
    blocks, size, share = sizes
    deployment = inferred.deployment
    evidence = kv_evidence(deployment, num_gpu_blocks=blocks, block_size=size,
                           gpu_memory_utilization=share)  # fmt: skip
    matches = gpus_matching(deployment, evidence)
    where = (
        f"the KV cache ({blocks:,} blocks x {size} tokens = "
        f"{evidence.kv_bytes_per_gpu / 1e9:.1f} GB per GPU beside "
        f"{evidence.weight_bytes_per_gpu / 1e9:.1f} GB of weights in {share:.0%} of memory) "
        f"implies {evidence.low_hbm_bytes / 1e9:.0f}-{evidence.high_hbm_bytes / 1e9:.0f} GB per GPU"
    )
    said = list(inferred.assumptions)
    if not matches:
        said[-1] += f"; {where}, which no catalog GPU has"
        return dataclasses.replace(inferred, assumptions=tuple(said))
    said[-1] = f"GPU one of {', '.join(matches)}: {where} (pass --gpu)"
    chosen = dataclasses.replace(deployment, gpu=get_gpu(matches[0]))
    return InferredDeployment(chosen, tuple(said), False, matches)


def _cache_sizes(config: Mapping[str, str]) -> tuple[int, int, float] | None:
    """num_gpu_blocks, block_size and gpu_memory_utilization, or None when any is missing."""
    try:
        blocks, size = int(config["num_gpu_blocks"]), int(config["block_size"])
        share = float(config["gpu_memory_utilization"])
    except (KeyError, ValueError):
        return None
    return (blocks, size, share) if blocks > 0 and size > 0 and 0 < share <= 1 else None
