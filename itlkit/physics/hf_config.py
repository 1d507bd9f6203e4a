"""Read a Hugging Face `config.json` into a `Model` (architecture fields only).

Reads llama, mistral, qwen2/3, mixtral, qwen3_moe, gemma2, deepseek_v2/v3, gpt_oss and other
llama-like layouts; multimodal configs are read through their `text_config`. Field meanings are
transformers' (`num_hidden_layers`, `num_key_value_heads`, `num_local_experts`, ...).
"""

from __future__ import annotations

import json
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.physics.model import Model

_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text"}


def read_hf_config(path: str | Path) -> dict:
    """The JSON object of a `config.json` (a multimodal config's `text_config` if it has one)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read model config {path}: {exc.strerror}") from None
    if not text.strip():
        raise ConfigError(f"model config {path} is empty")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"model config {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg})"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(f"model config {path} must hold a JSON object")
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        config = {**config["text_config"], "model_type": config["text_config"].get("model_type")}
    return config


def model_from_hf_config(path: str | Path) -> Model:
    """Build a Model from a Hugging Face `config.json`."""
    path = Path(path)
    config = read_hf_config(path)
    fields = _dense_fields(config, path)
    fields.update(_moe_fields(config, path))
    fields.update(_mla_fields(config))
    fields.update(_sliding_fields(config, layers=fields["num_layers"]))
    if not fields["intermediate_size"] and not fields.get("num_experts"):
        raise ConfigError(f"model config {path}: field 'intermediate_size' is missing")
    model = Model(**fields)
    if model.attention_head_dim <= 0:
        raise ConfigError(f"model config {path}: cannot work out head_dim")
    return model


def _positive(config: dict, key: str, path: Path) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(
            f"model config {path}: field {key!r} is missing or not a positive integer "
            f"(got {value!r})"
        )
    return value


def _model_type(config: dict) -> str:
    return str(config.get("model_type") or "llama")


def _dense_fields(config: dict, path: Path) -> dict:
    """Name, layer count, widths, heads, vocabulary and the per-architecture quirks."""
    model_type = _model_type(config)
    layers = _positive(config, "num_hidden_layers", path)
    hidden = _positive(config, "hidden_size", path)
    heads = _positive(config, "num_attention_heads", path)
    slug = path.parent.name if path.name == "config.json" else path.stem
    fields = dict(
        slug=slug if slug not in ("", ".") else "custom-model",
        hf_id=str(config.get("_name_or_path", "")),
        arch=model_type,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=config.get("head_dim") or None,
        intermediate_size=int(config.get("intermediate_size") or 0),
        vocab_size=_positive(config, "vocab_size", path),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", model_type in _TIED_BY_DEFAULT)),
        qkv_bias=model_type == "qwen2" or bool(config.get("qkv_bias", False)),
        attention_bias=bool(config.get("attention_bias", False)),
        qk_norm=model_type in {"qwen3", "qwen3_moe"},
        norms_per_layer=4 if model_type in {"gemma2", "gemma3_text"} else 2,
    )
    if model_type == "gpt_oss":
        fields.update(attention_bias=True, attention_sinks=True)
    return fields


def _moe_fields(config: dict, path: Path) -> dict:
    """Routed and shared experts, top-k, and which layers stay dense (none for a dense model)."""
    experts = (
        config.get("num_local_experts")
        or config.get("num_experts")
        or config.get("n_routed_experts")
    )
    if not experts:
        return {}
    model_type = _model_type(config)
    fields = dict(
        num_experts=int(experts),
        experts_per_token=int(config.get("num_experts_per_tok") or 0),
        moe_intermediate_size=int(
            config.get("moe_intermediate_size") or config.get("intermediate_size") or 0
        ),
        num_shared_experts=int(config.get("n_shared_experts") or 0),
        first_dense_layers=int(config.get("first_k_dense_replace") or 0),
    )
    if fields["experts_per_token"] <= 0 or fields["moe_intermediate_size"] <= 0:
        raise ConfigError(
            f"model config {path}: an MoE config needs 'num_experts_per_tok' and an expert "
            "intermediate size"
        )
    if model_type == "gpt_oss":
        fields.update(expert_bias=True, router_bias=True)
    if model_type.startswith("deepseek_v3"):
        fields.update(router_bias=True)
    return fields


def _mla_fields(config: dict) -> dict:
    """DeepSeek's multi-head latent attention: the low-rank q and compressed KV projections."""
    if not config.get("kv_lora_rank"):
        return {}
    return dict(
        q_lora_rank=int(config.get("q_lora_rank") or 0),
        kv_lora_rank=int(config["kv_lora_rank"]),
        qk_nope_head_dim=int(config.get("qk_nope_head_dim") or 0),
        qk_rope_head_dim=int(config.get("qk_rope_head_dim") or 0),
        v_head_dim=int(config.get("v_head_dim") or 0),
    )


def _sliding_fields(config: dict, *, layers: int) -> dict:
    """The sliding window and how many layers use it (`layer_types`, else the family's rule)."""
    window = config.get("sliding_window")
    if not window or not config.get("use_sliding_window", True):
        return {}
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list):
        sliding = sum(1 for t in layer_types if t == "sliding_attention")
    elif _model_type(config) in {"gemma2", "gpt_oss"}:
        sliding = layers // 2
    else:
        sliding = layers
    return dict(sliding_window=int(window), sliding_layers=sliding) if sliding else {}
