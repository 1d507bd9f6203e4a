"""From a served model name (vLLM's `model_name` label) to a catalog model and weight precision.

vLLM labels every sample with the name it serves: a Hugging Face id
(`neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8`), a local path
(`/home/data/models/Meta-Llama-3-8B-Instruct`) or `--served-model-name`. The last path part,
without its fine-tuning and quantization suffixes, is matched against the catalog's Hugging Face
ids; a quantization suffix gives the weight precision. Every match says how it was made, so the
caller can print it as an assumption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from itlkit.physics.model_catalog import MODELS

# Suffixes that fine-tuning and quantization add to a base model's name; the precision they imply.
_QUANT_SUFFIXES = (
    (r"fp8(?:[-_]dynamic|[-_]static)?", "fp8"),
    (r"w8a8(?:[-_]fp8)?", "fp8"),
    (r"int8|w8a16|8bit", "int8"),
    (r"awq|gptq(?:[-_]int4)?|int4|w4a16|4bit|bnb[-_]4bit", "int4"),
    (r"(?:mx|nv)?fp4(?:[-_]preview)?", "fp4"),  # AMD's -MXFP4-Preview, NVIDIA's -FP4 (W4A4)
)
_TUNING_WORDS = {"instruct", "chat", "it", "hf", "base"}
# Names whose architecture is a catalog entry's under another release name.
_SAME_ARCHITECTURE = {
    "meta-llama-3-8b": ("llama-3.1-8b", "Llama 3 8B has Llama 3.1 8B's architecture"),
    "meta-llama-3-70b": ("llama-3.1-70b", "Llama 3 70B has Llama 3.1 70B's architecture"),
    "llama-3-8b": ("llama-3.1-8b", "Llama 3 8B has Llama 3.1 8B's architecture"),
    "llama-3-70b": ("llama-3.1-70b", "Llama 3 70B has Llama 3.1 70B's architecture"),
}


@dataclass(frozen=True)
class ModelGuess:
    """A catalog model (and weight precision, if the name states one) read off a served name."""

    slug: str
    weight_precision: str | None
    reason: str
    alias: str = ""  # why a release name has a catalog entry's architecture (`_SAME_ARCHITECTURE`)

    @property
    def reading(self) -> str:
        """How the name was read, for an 'assumed:' line: "read as the catalog's S, ..."."""
        why = f"; {self.alias}" if self.alias else ""
        return f"read as the catalog's {self.slug}, the architecture its name gives{why}"


def _stem(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def _strip(stem: str) -> tuple[str, str | None]:
    """The base name and the precision its suffixes state (None: not stated)."""
    precision = None
    changed = True
    while changed:
        changed = False
        for pattern, implied in _QUANT_SUFFIXES:
            m = re.fullmatch(rf"(.+?)[-_.](?:{pattern})", stem)
            if m:
                stem, precision, changed = m.group(1), precision or implied, True
    words = [w for w in stem.split("-") if w not in _TUNING_WORDS]
    if words[:2] == ["meta", "llama"]:  # Meta-Llama-3.1-8B is Llama-3.1-8B
        words = words[1:]
    return "-".join(words), precision


def _catalog_bases() -> dict[str, str]:
    bases = {}
    for slug, model in MODELS.items():
        bases[slug] = slug
        if model.hf_id:
            bases[_strip(_stem(model.hf_id))[0]] = slug
    return bases


def guess_model(model_name: str) -> ModelGuess | None:
    """The catalog model a served name refers to, or None when it matches none."""
    if not model_name:
        return None
    base, precision = _strip(_stem(model_name))
    bases = _catalog_bases()
    said = f"from model_name {model_name!r}"
    if precision:
        said += f" ({precision.upper()} weights from its suffix)"
    if base in bases:
        return ModelGuess(bases[base], precision, said)
    for alias, (slug, why) in _SAME_ARCHITECTURE.items():
        if base == alias or base.startswith(alias + "-"):
            return ModelGuess(slug, precision, f"{said}; {why}", alias=why)
    return None
