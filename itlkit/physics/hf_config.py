"""Read a Hugging Face `config.json` into a `Model` (architecture fields only).

Each family is read by its own field names, as transformers' config classes define them:
llama-like layouts (llama, mistral, mixtral, qwen2/3 and their MoE, phi3, gemma 2/3, llama 4,
deepseek_v2/v3, gpt_oss), and the older ones (gpt2, gptj, gpt_neox, opt, falcon, phi). Multimodal
configs are read through their `text_config`. Every field used is checked for type and range; a
bad one raises one `ConfigError` line naming the file and the field. A config with layers that
are not attention over a KV cache (linear attention, state-space layers) is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.input_files import read_json_file
from itlkit.physics.model import Model

_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text", "gpt2", "opt", "falcon"}
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3_text"}
_FOUR_NORMS = {"gemma2", "gemma3_text"}
_FALCON_TYPES = {"falcon", "RefinedWeb", "RefinedWebModel"}
_MISSING = object()
# Above any real model's size field (hidden sizes ~1e4, vocabularies ~1e6, contexts ~1e7), and
# low enough that products of them (parameters, FLOPs, bytes) stay finite floats.
MOST_SIZE = 10**8


def _text_part(config: dict, where) -> dict:
    """A multimodal config's `text_config` (with its model_type), else the config itself."""
    if "num_hidden_layers" not in config and "text_config" in config:
        text_config = config["text_config"]
        if not isinstance(text_config, dict):
            raise ConfigError(f"model config {where}: field 'text_config' must be a JSON object")
        return {
            "_name_or_path": config.get("_name_or_path"),
            **text_config,
            "model_type": text_config.get("model_type"),
        }
    return config


def read_hf_config(path: str | Path) -> dict:
    """The JSON object of a `config.json` (a multimodal config's `text_config` if it has one)."""
    config = read_json_file(path, kind="model config.json")
    if not isinstance(config, dict):
        raise ConfigError(f"model config {path} must hold a JSON object")
    return _text_part(config, path)


@dataclass(frozen=True)
class _Fields:
    """Typed, range-checked reads of one config's fields; errors name the file and the field."""

    config: dict
    path: Path

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"model config {self.path}: field {key!r} {problem}")

    def has(self, key: str) -> bool:
        return self.config.get(key) is not None

    def int(self, key: str, default=_MISSING, *, minimum: int = 1) -> int:
        """An integer from `minimum` to MOST_SIZE (JSON null counts as absent; 4096.0 reads as
        4096)."""
        value = self.config.get(key)
        if value is None:
            if default is _MISSING:
                raise self.fail(key, "is missing")
            return default
        kind = f"an integer from {minimum} to {MOST_SIZE:,}"
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be {kind} (got {shown})")
        if isinstance(value, float) and not value.is_integer():
            raise self.fail(key, f"must be {kind} (got {shown})")
        if not minimum <= value <= MOST_SIZE:
            raise self.fail(key, f"must be {kind} (got {shown})")
        return int(value)

    def first_int(self, keys: tuple[str, ...], default=_MISSING, *, minimum: int = 1) -> int:
        """The first of `keys` present (families name one quantity differently)."""
        for key in keys:
            if self.has(key):
                return self.int(key, minimum=minimum)
        if default is _MISSING:
            raise self.fail(keys[0], "is missing")
        return default

    def bool(self, key: str, default: bool) -> bool:
        """A JSON true/false (the string "false" would read as true, so it is refused)."""
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false (got {value!r})")
        return value

    def str(self, key: str, default: str) -> str:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string (got {value!r})")
        return value

    def list(self, key: str) -> list | None:
        value = self.config.get(key)
        if value is not None and not isinstance(value, list):
            raise self.fail(key, f"must be a list (got {value!r})")
        return value


def model_from_hf_config(path: str | Path) -> Model:
    """Build a Model from a Hugging Face `config.json` (or the model folder that holds one)."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    slug = path.parent.name if path.name == "config.json" else path.stem
    return _model(_Fields(read_hf_config(path), path), slug=slug)


def model_from_hf_dict(config: dict, *, where: str, slug: str) -> Model:
    """Build a Model from a `config.json`'s fields held in another file (`where` names it)."""
    if not isinstance(config, dict):
        raise ConfigError(f"model config {where} must be a JSON object")
    return _model(_Fields(_text_part(config, where), Path(where)), slug=slug)


def _model(f: _Fields, *, slug: str) -> Model:
    _refuse_other_layer_kinds(f)
    model_type = f.str("model_type", "llama") or "llama"
    reader = _FAMILY_READERS.get(model_type, _llama_like_fields)
    fields = reader(f, model_type)
    fields.update(_moe_fields(f, model_type, layers=fields["num_layers"]))
    fields.update(_mla_fields(f))
    fields.update(_sliding_fields(f, model_type, layers=fields["num_layers"]))
    fields.update(
        slug=slug if slug not in ("", ".") else "custom-model",
        hf_id=f.str("_name_or_path", ""),
        arch=model_type,
    )
    _check_heads(f, fields)
    if not fields["intermediate_size"] and not fields.get("num_experts"):
        raise f.fail("intermediate_size", "is missing")
    return Model(**fields)


# Fields of layers that are not attention over a KV cache: linear attention (Qwen3-Next's
# `full_attention_interval`, `linear_num_value_heads`; Kimi Linear's `linear_attn_config`;
# MiniMax's `attn_type_list`) and state-space layers (Jamba's `layers_block_type`,
# `attn_layer_period`; Nemotron-H's `hybrid_override_pattern`; `mamba_*` and `ssm_*` fields).
# Read as a llama-like model, such a config would price every layer's KV and attention as full
# attention's: refused instead, naming the field.
_OTHER_LAYER_FIELDS = ("full_attention_interval", "linear_num_value_heads", "linear_attn_config",
                       "attn_type_list", "layers_block_type", "attn_layer_period",
                       "hybrid_override_pattern")  # fmt: skip
_OTHER_LAYER_PREFIXES = ("mamba", "ssm_")
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "attention")


def _refuse_other_layer_kinds(f: _Fields) -> None:
    """A config with layers other than attention over a KV cache: one error naming the field."""
    for key in f.config:
        if key in _OTHER_LAYER_FIELDS or key.startswith(_OTHER_LAYER_PREFIXES):
            raise f.fail(key, "describes layers that are not attention over a KV cache "
                              "(linear attention or a state-space model), which itlkit does "
                              "not model")  # fmt: skip
    kinds = f.config.get("layer_types")
    if isinstance(kinds, list):
        # (entries that are not strings are `_sliding_fields`' error, not this one's)
        other = sorted({k for k in kinds if isinstance(k, str) and k not in ATTENTION_LAYER_TYPES})
        if other:
            raise f.fail("layer_types", f"holds {other[0]!r:.40} layers; itlkit models "
                                        "attention layers only (full or sliding)")  # fmt: skip


# ---- families ---------------------------------------------------------------------------------
def _llama_like_fields(f: _Fields, model_type: str) -> dict:
    """Llama's field names: mistral, qwen2/3, phi3, gemma 2/3, llama 4, deepseek, gpt-oss."""
    heads = f.int("num_attention_heads")
    llama4 = model_type in {"llama4", "llama4_text"}
    intermediate = "intermediate_size_mlp" if llama4 else "intermediate_size"
    fields = dict(
        num_layers=f.int("num_hidden_layers"),
        hidden_size=f.int("hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=f.int("num_key_value_heads", heads),
        head_dim=f.int("head_dim", None),
        intermediate_size=f.int(intermediate, 0),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", model_type in _TIED_BY_DEFAULT),
        qkv_bias=model_type in {"qwen2", "qwen2_moe"} or f.bool("qkv_bias", False),
        attention_bias=f.bool("attention_bias", model_type == "gpt_oss"),
        mlp_bias=f.bool("mlp_bias", False),
        qk_norm=model_type in _QK_NORM,
        norms_per_layer=4 if model_type in _FOUR_NORMS else 2,
    )
    if model_type == "gpt_oss":
        fields.update(attention_bias=True, attention_sinks=True)
    return fields


def _gpt2_fields(f: _Fields, model_type: str) -> dict:
    """GPT-2: learned positions, LayerNorm with biases, a 4x GELU MLP with biases, tied head."""
    hidden = f.int("n_embd")
    return dict(
        num_layers=f.int("n_layer"),
        hidden_size=hidden,
        num_attention_heads=f.int("n_head"),
        num_kv_heads=f.int("n_head"),
        intermediate_size=f.int("n_inner", 4 * hidden),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", True),
        attention_bias=True,
        norm_bias=True,
        gated_mlp=False,
        mlp_bias=True,
        position_embeddings=f.int("n_positions"),
    )


def _gptj_fields(f: _Fields, model_type: str) -> dict:
    """GPT-J: one LayerNorm per (parallel) block, bias-free attention, biased MLP and LM head."""
    hidden = f.int("n_embd")
    return dict(
        num_layers=f.int("n_layer"),
        hidden_size=hidden,
        num_attention_heads=f.int("n_head"),
        num_kv_heads=f.int("n_head"),
        intermediate_size=f.int("n_inner", 4 * hidden),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", False),
        norms_per_layer=1,
        norm_bias=True,
        gated_mlp=False,
        mlp_bias=True,
        lm_head_bias=True,
    )


def _gpt_neox_fields(f: _Fields, model_type: str) -> dict:
    """GPT-NeoX (Pythia): fused biased QKV, LayerNorm with biases, 4x GELU MLP, untied head."""
    heads = f.int("num_attention_heads")
    return dict(
        num_layers=f.int("num_hidden_layers"),
        hidden_size=f.int("hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=heads,
        intermediate_size=f.int("intermediate_size"),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", False),
        attention_bias=f.bool("attention_bias", True),
        norm_bias=True,
        gated_mlp=False,
        mlp_bias=True,
    )


def _opt_fields(f: _Fields, model_type: str) -> dict:
    """OPT: `ffn_dim`, learned positions with an offset of 2, biases everywhere, tied head."""
    heads, hidden = f.int("num_attention_heads"), f.int("hidden_size")
    proj = f.int("word_embed_proj_dim", hidden)
    bias = f.bool("enable_bias", True)
    if not f.bool("layer_norm_elementwise_affine", True):
        raise f.fail("layer_norm_elementwise_affine", "false (no LayerNorm weights) is unsupported")
    pre_norm = f.bool("do_layer_norm_before", True)
    return dict(
        num_layers=f.int("num_hidden_layers"),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=heads,
        intermediate_size=f.int("ffn_dim"),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", True),
        attention_bias=bias,
        norm_bias=True,
        final_norm=pre_norm and not f.bool("_remove_final_layer_norm", False),
        gated_mlp=False,
        mlp_bias=bias,
        # OPTLearnedPositionalEmbedding keeps 2 extra rows (its padding offset).
        position_embeddings=f.int("max_position_embeddings") + 2,
        word_embed_proj_dim=proj if proj != hidden else 0,
    )


def _falcon_fields(f: _Fields, model_type: str) -> dict:
    """Falcon: multi-query (7B) or grouped KV (`new_decoder_architecture`, 40B/180B), LayerNorm."""
    heads = f.first_int(("num_attention_heads", "n_head"))
    hidden = f.int("hidden_size")
    new_arch = f.bool("new_decoder_architecture", False)
    if new_arch:
        kv_heads = f.first_int(("num_kv_heads", "n_head_kv"), heads)
        norms = f.int("num_ln_in_parallel_attn", 2)
    else:
        kv_heads = 1 if f.bool("multi_query", True) else heads
        norms = 1 if f.bool("parallel_attn", True) else 2
    bias = f.bool("bias", False)
    return dict(
        num_layers=f.first_int(("num_hidden_layers", "n_layer")),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        intermediate_size=f.int("ffn_hidden_size", 4 * hidden),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", True),
        attention_bias=bias,
        norms_per_layer=norms,
        norm_bias=True,
        gated_mlp=False,
        mlp_bias=bias,
    )


def _phi_fields(f: _Fields, model_type: str) -> dict:
    """Phi-1/2: parallel block with one LayerNorm, biased attention, 4x GELU MLP, biased head."""
    heads = f.int("num_attention_heads")
    return dict(
        num_layers=f.int("num_hidden_layers"),
        hidden_size=f.int("hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=f.int("num_key_value_heads", heads),
        intermediate_size=f.int("intermediate_size"),
        vocab_size=f.int("vocab_size"),
        tie_word_embeddings=f.bool("tie_word_embeddings", False),
        attention_bias=True,
        norms_per_layer=1,
        norm_bias=True,
        gated_mlp=False,
        mlp_bias=True,
        lm_head_bias=True,
    )


_FAMILY_READERS = {
    "gpt2": _gpt2_fields,
    "gptj": _gptj_fields,
    "gpt_neox": _gpt_neox_fields,
    "opt": _opt_fields,
    "phi": _phi_fields,
    **{name: _falcon_fields for name in _FALCON_TYPES},
}


# ---- shared parts -----------------------------------------------------------------------------
def _check_heads(f: _Fields, fields: dict) -> None:
    """Query heads must split evenly over KV heads, and heads must split the hidden width."""
    heads, kv_heads = fields["num_attention_heads"], fields["num_kv_heads"]
    if not fields.get("kv_lora_rank") and heads % kv_heads:
        raise f.fail(
            "num_key_value_heads",
            f"({kv_heads}) must divide num_attention_heads ({heads})",
        )
    if fields.get("head_dim") is None and fields["hidden_size"] % heads:
        raise f.fail(
            "num_attention_heads",
            f"({heads}) must divide hidden_size ({fields['hidden_size']}) when head_dim is unset",
        )


def _moe_fields(f: _Fields, model_type: str, *, layers: int) -> dict:
    """Routed and shared experts, top-k, and which layers stay dense (none for a dense model)."""
    keys = ("num_local_experts", "num_experts", "n_routed_experts")
    experts = f.first_int(keys, 0, minimum=0)
    if not experts:
        return {}
    top_k = f.int("num_experts_per_tok")
    if top_k > experts:
        raise f.fail("num_experts_per_tok", f"({top_k}) exceeds the {experts} experts")
    fields = dict(num_experts=experts, experts_per_token=top_k)
    if model_type in {"llama4", "llama4_text"}:
        # Experts use `intermediate_size`, dense layers `intermediate_size_mlp`; one shared expert.
        fields.update(
            moe_intermediate_size=f.int("intermediate_size"),
            num_shared_experts=1,
            moe_layer_step=f.int("interleave_moe_layer_step", 1),
        )
    else:
        fields.update(
            moe_intermediate_size=f.first_int(("moe_intermediate_size", "intermediate_size")),
            num_shared_experts=f.int("n_shared_experts", 0, minimum=0),
            first_dense_layers=f.int("first_k_dense_replace", 0, minimum=0),
            moe_layer_step=f.int("decoder_sparse_step", 1),
        )
    if f.int("moe_layer_freq", 1) != 1:
        raise f.fail("moe_layer_freq", "other than 1 is not supported")
    if f.list("mlp_only_layers"):
        raise f.fail("mlp_only_layers", "(dense layers listed by index) is not supported")
    if f.has("shared_expert_intermediate_size"):
        shared = f.int("shared_expert_intermediate_size", minimum=0)
        fields.update(
            num_shared_experts=1 if shared else 0,
            shared_expert_intermediate_size=shared,
            shared_expert_gate=model_type == "qwen2_moe",
        )
    if fields.get("first_dense_layers", 0) > layers:
        raise f.fail("first_k_dense_replace", f"exceeds num_hidden_layers ({layers})")
    if fields["moe_layer_step"] > layers:
        raise f.fail("interleave_moe_layer_step", f"exceeds num_hidden_layers ({layers})")
    if model_type == "gpt_oss":
        fields.update(expert_bias=True, router_bias=True)
    if model_type.startswith("deepseek_v3"):
        fields.update(router_bias=True)
    return fields


def _mla_fields(f: _Fields) -> dict:
    """DeepSeek's multi-head latent attention: the low-rank q and compressed KV projections."""
    if not f.int("kv_lora_rank", 0, minimum=0):
        return {}
    return dict(
        q_lora_rank=f.int("q_lora_rank", 0, minimum=0),
        kv_lora_rank=f.int("kv_lora_rank"),
        qk_nope_head_dim=f.int("qk_nope_head_dim"),
        qk_rope_head_dim=f.int("qk_rope_head_dim"),
        v_head_dim=f.int("v_head_dim"),
    )


def _sliding_fields(f: _Fields, model_type: str, *, layers: int) -> dict:
    """The sliding window and how many layers use it (`layer_types`, else the family's rule)."""
    if model_type == "llama4_text":
        return _chunked_fields(f, layers=layers)
    window = f.int("sliding_window", 0, minimum=0)
    if not window or not f.bool("use_sliding_window", True):
        return {}
    layer_types = f.list("layer_types")
    if layer_types is not None:
        if len(layer_types) != layers or not all(isinstance(t, str) for t in layer_types):
            raise f.fail("layer_types", f"must list one string per layer ({layers})")
        sliding = sum(1 for t in layer_types if t == "sliding_attention")
    elif model_type in {"gemma2", "gpt_oss"}:
        sliding = layers // 2
    elif model_type == "gemma3_text":
        # Gemma 3: every `sliding_window_pattern`-th layer is global (5 local : 1 global).
        pattern = f.int("sliding_window_pattern", 6)
        sliding = layers - layers // pattern
    else:
        sliding = layers
    return dict(sliding_window=window, sliding_layers=sliding) if sliding else {}


def _chunked_fields(f: _Fields, *, layers: int) -> dict:
    """Llama 4's chunked local attention, held as a sliding window of `attention_chunk_size`.

    The RoPE layers (`no_rope_layers[i] == 1`; by default 3 of every 4) attend within their
    chunk, so they hold at most one chunk of KV: an upper bound, as a window is.
    """
    chunk = f.int("attention_chunk_size", 0, minimum=0)
    if not chunk:
        return {}
    flags = f.list("no_rope_layers")
    if flags:
        if len(flags) != layers or any(isinstance(x, bool) or x not in (0, 1) for x in flags):
            raise f.fail("no_rope_layers", f"must list one 0 or 1 per layer ({layers})")
        chunked = sum(flags)
    else:
        interval = f.int("no_rope_layer_interval", 4)
        chunked = layers - layers // interval  # every `interval`-th layer is NoPE and global
    return dict(sliding_window=chunk, sliding_layers=chunked) if chunked else {}
