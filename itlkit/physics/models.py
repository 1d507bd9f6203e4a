"""Model catalog and architecture arithmetic: parameter counts, streamed weights, KV bytes.

Entries hold only architecture fields (from each model's `config.json`, sources attached); every
count is computed from them here. A user's own Hugging Face `config.json` works wherever a catalog
name does (`get_model("path/to/config.json")`).

Formulas follow `shared/spec/hardware-models-measurements.md` section 2: a dense decoder is
embedding + layers x (attention + MLP + norms) + final norm (+ an untied LM head); MoE layers
replace the MLP by experts and a router; DeepSeek's MLA caches one compressed latent per layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from itlkit.errors import ConfigError
from itlkit.units import Precision, lookup


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer's architecture (Hugging Face config field meanings)."""

    slug: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    hf_id: str = ""
    arch: str = "llama"
    head_dim: int | None = None
    qkv_bias: bool = False  # Qwen2: biases on q, k, v only
    attention_bias: bool = False  # gpt-oss: biases on q, k, v and o
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head
    qk_norm: bool = False  # Qwen3: per-head RMSNorm on q and k
    norms_per_layer: int = 2
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    expert_bias: bool = False
    router_bias: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int | None = None
    sliding_layers: int = 0
    source: str = ""

    # ---- shape -------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    # ---- parameter counts --------------------------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        """q, k, v, o projections with their biases and norms (MLA: the low-rank projections)."""
        h, nq = self.hidden_size, self.num_attention_heads
        if self.is_mla:
            qk_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * nq * qk_dim
            else:
                q = h * nq * qk_dim
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * nq * (self.qk_nope_head_dim + self.v_head_dim)
            )
            return q + kv + nq * self.v_head_dim * h
        d, nkv = self.attention_head_dim, self.num_kv_heads
        params = h * nq * d + 2 * h * nkv * d + nq * d * h
        if self.qkv_bias or self.attention_bias:
            params += nq * d + 2 * nkv * d
        if self.attention_bias:
            params += h
        if self.qk_norm:
            params += 2 * d
        if self.attention_sinks:
            params += nq
        return params

    @property
    def expert_params(self) -> int:
        """One routed expert: gate, up and down projections (SwiGLU), with biases if any."""
        h, i = self.hidden_size, self.moe_intermediate_size
        return 3 * h * i + (2 * i + h if self.expert_bias else 0)

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)

    @property
    def dense_mlp_params_per_layer(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    def _layer_params(self, *, moe: bool, experts: float) -> float:
        base = self.attention_params_per_layer + self.norms_per_layer * self.hidden_size
        if not moe:
            return base + self.dense_mlp_params_per_layer
        shared = self.num_shared_experts * self.expert_params
        return base + self.router_params_per_layer + shared + experts * self.expert_params

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def _params_with_experts(self, experts: float) -> float:
        dense_layers = self.num_layers - self.moe_layers
        return (
            self.embedding_params
            + self.lm_head_params
            + self.hidden_size  # final norm
            + dense_layers * self._layer_params(moe=False, experts=0)
            + self.moe_layers * self._layer_params(moe=True, experts=experts)
        )

    @property
    def total_params(self) -> int:
        """Every parameter of the main model (both embeddings when untied)."""
        return int(self._params_with_experts(self.num_experts))

    @property
    def active_params(self) -> int:
        """Parameters one token uses: only its top-k routed experts (plus shared ones)."""
        return int(self._params_with_experts(self.experts_per_token))

    def expected_experts_touched(self, *, tokens):
        """Distinct experts per MoE layer that `tokens` tokens hit under uniform top-k routing.

        E * (1 - (1 - k/E)^tokens): k at one token, approaching E as the batch grows
        (shared/spec/hardware-models-measurements.md, Mixtral note). Never below k.
        """
        tokens = np.asarray(tokens, dtype=float)
        e, k = self.num_experts, self.experts_per_token
        touched = e * (1.0 - (1.0 - k / e) ** np.maximum(tokens, 1.0))
        return np.clip(touched, k, e)

    def streamed_params(self, *, tokens=1, exclude_input_embedding: bool = False):
        """Parameters a step over `tokens` tokens must read from HBM.

        Dense models read everything. MoE models read the experts the batch is expected to touch.
        With `exclude_input_embedding`, an untied input-embedding table (a row gather, not a
        stream) is left out; a tied one is still streamed as the LM head.
        """
        tokens = np.asarray(tokens, dtype=float)
        if self.is_moe:
            params = self._params_with_experts(self.expected_experts_touched(tokens=tokens))
        else:
            params = np.full_like(tokens, float(self.total_params))
        if exclude_input_embedding and not self.tie_word_embeddings:
            params = params - self.embedding_params
        return params

    # ---- KV cache ----------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: K and V heads (GQA) or the MLA latent + rope key."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.attention_head_dim

    def kv_bytes_per_token(self, precision: Precision) -> float:
        """KV bytes one token adds across all layers: 2 x L x kv_heads x head_dim x bytes."""
        elements = self.num_layers * self.kv_elements_per_token_per_layer()
        return elements * precision.bytes_per_element

    def kv_bytes(self, precision: Precision, *, context_tokens):
        """KV bytes held (and read by one decode step) for one sequence at `context_tokens`.

        Sliding-window layers keep only the last `sliding_window` tokens.
        """
        context = np.asarray(context_tokens, dtype=float)
        per_layer = self.kv_elements_per_token_per_layer() * precision.bytes_per_element
        full_layers = self.num_layers - self.sliding_layers
        held = full_layers * context
        if self.sliding_layers:
            held = held + self.sliding_layers * np.minimum(context, self.sliding_window)
        return per_layer * held

    def kv_heads_per_gpu(self, *, tp: int) -> float:
        """KV heads each TP rank holds: split when TP divides them, replicated when TP exceeds
        them (vLLM's rule); MLA's latent is replicated on every rank."""
        if self.is_mla:
            return 1.0
        return max(self.num_kv_heads / tp, 1.0)

    def kv_fraction_per_gpu(self, *, tp: int) -> float:
        """Share of a sequence's KV bytes one TP rank holds."""
        if self.is_mla:
            return 1.0
        return self.kv_heads_per_gpu(tp=tp) / self.num_kv_heads


def check_tensor_parallel(model: Model, *, tp: int) -> None:
    """Raise ConfigError when the model cannot be split over `tp` GPUs."""
    if isinstance(tp, bool) or not isinstance(tp, (int, np.integer)) or tp < 1:
        raise ConfigError(f"TP must be a positive integer, got {tp!r}")
    if model.num_attention_heads % tp:
        raise ConfigError(
            f"TP={tp} does not divide the {model.num_attention_heads} attention heads of "
            f"{model.slug}; valid TP sizes divide it"
        )
    kv = model.num_kv_heads
    if not model.is_mla and kv % tp and tp % kv:
        raise ConfigError(
            f"TP={tp} does not divide the {kv} KV heads of {model.slug} (and is not a multiple "
            "of them, which would replicate each head); choose a TP that divides "
            f"{kv} or is a multiple of it"
        )


# ---- Hugging Face config.json ---------------------------------------------------------------
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text"}


def model_from_hf_config(path: str | Path) -> Model:
    """Build a Model from a Hugging Face `config.json` (llama, mistral, qwen2/3, mixtral,
    qwen3_moe, gemma2, deepseek_v2/v3, gpt_oss and other llama-like layouts)."""
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

    def need(key: str) -> int:
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(
                f"model config {path}: field {key!r} is missing or not a positive integer "
                f"(got {value!r})"
            )
        return value

    model_type = str(config.get("model_type") or "llama")
    layers = need("num_hidden_layers")
    hidden = need("hidden_size")
    heads = need("num_attention_heads")
    fields: dict = dict(
        slug=path.parent.name if path.name == "config.json" else path.stem,
        hf_id=str(config.get("_name_or_path", "")),
        arch=model_type,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=config.get("head_dim") or None,
        intermediate_size=int(config.get("intermediate_size") or 0),
        vocab_size=need("vocab_size"),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", model_type in _TIED_BY_DEFAULT)),
        qkv_bias=model_type == "qwen2" or bool(config.get("qkv_bias", False)),
        attention_bias=bool(config.get("attention_bias", False)),
        qk_norm=model_type in {"qwen3", "qwen3_moe"},
        norms_per_layer=4 if model_type in {"gemma2", "gemma3_text"} else 2,
    )
    if fields["slug"] in ("", "."):
        fields["slug"] = "custom-model"
    experts = (
        config.get("num_local_experts")
        or config.get("num_experts")
        or config.get("n_routed_experts")
    )
    if experts:
        fields.update(
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
        fields.update(attention_bias=True, attention_sinks=True, expert_bias=True, router_bias=True)
    if model_type.startswith("deepseek_v3"):
        fields.update(router_bias=True)
    if config.get("kv_lora_rank"):
        fields.update(
            q_lora_rank=int(config.get("q_lora_rank") or 0),
            kv_lora_rank=int(config["kv_lora_rank"]),
            qk_nope_head_dim=int(config.get("qk_nope_head_dim") or 0),
            qk_rope_head_dim=int(config.get("qk_rope_head_dim") or 0),
            v_head_dim=int(config.get("v_head_dim") or 0),
        )
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True):
        layer_types = config.get("layer_types")
        if isinstance(layer_types, list):
            sliding = sum(1 for t in layer_types if t == "sliding_attention")
        elif model_type in {"gemma2", "gpt_oss"}:
            sliding = layers // 2
        else:
            sliding = layers
        if sliding:
            fields.update(sliding_window=int(window), sliding_layers=sliding)
    if not fields["intermediate_size"] and not experts:
        raise ConfigError(f"model config {path}: field 'intermediate_size' is missing")
    model = Model(**fields)
    if model.attention_head_dim <= 0:
        raise ConfigError(f"model config {path}: cannot work out head_dim")
    return model


def get_model(name: str | Path | Model) -> Model:
    """A catalog model by slug (e.g. 'llama-3.1-8b'), or one read from a config.json path."""
    if isinstance(name, Model):
        return name
    text = str(name)
    if text.endswith(".json") or Path(text).is_file():
        return model_from_hf_config(text)
    return lookup("model", text, MODELS)


def with_overrides(model: Model, **fields) -> Model:
    """A copy of `model` with some fields changed (what-if studies)."""
    return replace(model, **fields)


MODELS: dict[str, Model] = {
    "llama-3.1-8b": Model(
        slug="llama-3.1-8b",
        hf_id="meta-llama/Llama-3.1-8B",
        arch="llama",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=128256,
        tie_word_embeddings=False,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md | https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "llama-3.1-70b": Model(
        slug="llama-3.1-70b",
        hf_id="meta-llama/Llama-3.1-70B",
        arch="llama",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=128256,
        tie_word_embeddings=False,
        source="https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py | https://github.com/vulkomilev/oumi/blob/main/configs/recipes/llama3_1/README.md",
    ),
    "llama-3.1-405b": Model(
        slug="llama-3.1-405b",
        hf_id="meta-llama/Llama-3.1-405B",
        arch="llama",
        num_layers=126,
        hidden_size=16384,
        num_attention_heads=128,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=53248,
        vocab_size=128256,
        tie_word_embeddings=False,
        source="https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "llama-3.2-1b": Model(
        slug="llama-3.2-1b",
        hf_id="meta-llama/Llama-3.2-1B",
        arch="llama",
        num_layers=16,
        hidden_size=2048,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=64,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
        source="https://github.com/kevinstephano/thunder_model_blocks/blob/main/hf_llama/llama_config.py",
    ),
    "llama-3.2-3b": Model(
        slug="llama-3.2-3b",
        hf_id="meta-llama/Llama-3.2-3B",
        arch="llama",
        num_layers=28,
        hidden_size=3072,
        num_attention_heads=24,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md",
    ),
    "llama-3.3-70b": Model(
        slug="llama-3.3-70b",
        hf_id="meta-llama/Llama-3.3-70B-Instruct",
        arch="llama",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=128256,
        tie_word_embeddings=False,
        source="identical architecture to Llama 3.1 70B (same config fields)",
    ),
    "mistral-7b-v0.3": Model(
        slug="mistral-7b-v0.3",
        hf_id="mistralai/Mistral-7B-v0.3",
        arch="mistral",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32768,
        tie_word_embeddings=False,
        source="v0.3 = v0.2 architecture with vocab extended to 32768; per-layer numel (attn 41,943,040; mlp 176,160,768) quoted in a public layer_numel json",
    ),
    "mixtral-8x7b-v0.1": Model(
        slug="mixtral-8x7b-v0.1",
        hf_id="mistralai/Mixtral-8x7B-v0.1",
        arch="mixtral",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        tie_word_embeddings=False,
        num_experts=8,
        experts_per_token=2,
        moe_intermediate_size=14336,
        source="MixtralConfig dump (mistralai/Mixtral-8x7B-Instruct-v0.1) quoted in public code; xorbitsai/inference docs (46.7B)",
    ),
    "qwen2.5-7b": Model(
        slug="qwen2.5-7b",
        hf_id="Qwen/Qwen2.5-7B",
        arch="qwen2",
        num_layers=28,
        hidden_size=3584,
        num_attention_heads=28,
        num_kv_heads=4,
        head_dim=128,
        intermediate_size=18944,
        vocab_size=152064,
        tie_word_embeddings=False,
        qkv_bias=True,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md",
    ),
    "qwen2.5-32b": Model(
        slug="qwen2.5-32b",
        hf_id="Qwen/Qwen2.5-32B",
        arch="qwen2",
        num_layers=64,
        hidden_size=5120,
        num_attention_heads=40,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=27648,
        vocab_size=152064,
        tie_word_embeddings=False,
        qkv_bias=True,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md",
    ),
    "qwen2.5-72b": Model(
        slug="qwen2.5-72b",
        hf_id="Qwen/Qwen2.5-72B",
        arch="qwen2",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=29568,
        vocab_size=152064,
        tie_word_embeddings=False,
        qkv_bias=True,
        source="Qwen2.5-72B-Instruct config quoted in public code (intermediate 29568, 80 layers, 64/8 heads, vocab 152064)",
    ),
    "qwen3-8b": Model(
        slug="qwen3-8b",
        hf_id="Qwen/Qwen3-8B",
        arch="qwen3",
        num_layers=36,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=12288,
        vocab_size=151936,
        tie_word_embeddings=False,
        qk_norm=True,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md | https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "qwen3-32b": Model(
        slug="qwen3-32b",
        hf_id="Qwen/Qwen3-32B",
        arch="qwen3",
        num_layers=64,
        hidden_size=5120,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=25600,
        vocab_size=151936,
        tie_word_embeddings=False,
        qk_norm=True,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md | https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "qwen3-30b-a3b": Model(
        slug="qwen3-30b-a3b",
        hf_id="Qwen/Qwen3-30B-A3B",
        arch="qwen3_moe",
        num_layers=48,
        hidden_size=2048,
        num_attention_heads=32,
        num_kv_heads=4,
        head_dim=128,
        intermediate_size=6144,
        vocab_size=151936,
        tie_word_embeddings=False,
        qk_norm=True,
        num_experts=128,
        experts_per_token=8,
        moe_intermediate_size=768,
        source="https://github.com/citsjtu2020/LLM-Prof/blob/main/sglang/Model_Config.md | https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "gemma-2-9b": Model(
        slug="gemma-2-9b",
        hf_id="google/gemma-2-9b",
        arch="gemma2",
        num_layers=42,
        hidden_size=3584,
        num_attention_heads=16,
        num_kv_heads=8,
        head_dim=256,
        intermediate_size=14336,
        vocab_size=256000,
        tie_word_embeddings=True,
        norms_per_layer=4,
        sliding_window=4096,
        sliding_layers=21,
        source="https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py | Gemma2 config.json dump quoted in public code (head_dim 256, vocab 256000, 42 layers)",
    ),
    "gemma-2-27b": Model(
        slug="gemma-2-27b",
        hf_id="google/gemma-2-27b",
        arch="gemma2",
        num_layers=46,
        hidden_size=4608,
        num_attention_heads=32,
        num_kv_heads=16,
        head_dim=128,
        intermediate_size=36864,
        vocab_size=256000,
        tie_word_embeddings=True,
        norms_per_layer=4,
        sliding_window=4096,
        sliding_layers=23,
        source="https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py",
    ),
    "deepseek-v3": Model(
        slug="deepseek-v3",
        router_bias=True,
        hf_id="deepseek-ai/DeepSeek-V3",
        arch="deepseek_v3",
        num_layers=61,
        hidden_size=7168,
        num_attention_heads=128,
        num_kv_heads=128,
        intermediate_size=18432,
        vocab_size=129280,
        tie_word_embeddings=False,
        num_experts=256,
        experts_per_token=8,
        moe_intermediate_size=2048,
        num_shared_experts=1,
        first_dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        source="https://github.com/tenstorrent/tt-metal/blob/main/models/demos/deepseek_v3/reference/README_WEIGHTS.md (671B main, 36.6B activated incl. 0.9B head; MTP 11.5B unique) | DeepSeek-V3 config.json fields quoted in public notes (hidden 7168, inter 18432, moe_inter 2048, 256 routed + 1 shared, top-8, 61 layers, q_lora 1536, kv_lora 512, rope 64, nope 128)",
    ),
    "gpt-oss-120b": Model(
        slug="gpt-oss-120b",
        attention_bias=True,
        attention_sinks=True,
        expert_bias=True,
        router_bias=True,
        hf_id="openai/gpt-oss-120b",
        arch="gpt_oss",
        num_layers=36,
        hidden_size=2880,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=64,
        intermediate_size=2880,
        vocab_size=201088,
        tie_word_embeddings=False,
        num_experts=128,
        experts_per_token=4,
        moe_intermediate_size=2880,
        sliding_window=128,
        sliding_layers=18,
        source="https://github.com/EchoCog/gpt-oss-20b/blob/main/docs/gpt-oss-20b-architecture.md (config fields) | vLLM/transformers GptOssConfig defaults (36 layers, 128 experts, top-4, 2880 hidden, 64/8 heads, head_dim 64, vocab 201088, window 128)",
    ),
    "gpt-oss-20b": Model(
        slug="gpt-oss-20b",
        attention_bias=True,
        attention_sinks=True,
        expert_bias=True,
        router_bias=True,
        hf_id="openai/gpt-oss-20b",
        arch="gpt_oss",
        num_layers=24,
        hidden_size=2880,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=64,
        intermediate_size=2880,
        vocab_size=201088,
        tie_word_embeddings=False,
        num_experts=32,
        experts_per_token=4,
        moe_intermediate_size=2880,
        sliding_window=128,
        sliding_layers=12,
        source="https://github.com/EchoCog/gpt-oss-20b/blob/main/docs/gpt-oss-20b-architecture.md",
    ),
    "llama-2-7b": Model(
        slug="llama-2-7b",
        hf_id="meta-llama/Llama-2-7b-hf",
        arch="llama",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=32,
        head_dim=128,
        intermediate_size=11008,
        vocab_size=32000,
        tie_word_embeddings=False,
        source="TensorRT-LLM docs/source/performance.md (v0.9.0) Llama2-7b ckpt_config.json",
    ),
    "llama-2-70b": Model(
        slug="llama-2-70b",
        hf_id="meta-llama/Llama-2-70b-hf",
        arch="llama",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=32000,
        tie_word_embeddings=False,
        source="TensorRT-LLM docs/source/performance.md (v0.9.0) Llama2-70b ckpt_config.json",
    ),
    "mistral-7b-v0.1": Model(
        slug="mistral-7b-v0.1",
        hf_id="mistralai/Mistral-7B-v0.1",
        arch="mistral",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        tie_word_embeddings=False,
        sliding_window=4096,
        sliding_layers=32,
        source="https://github.com/sumitdotml/transformers/blob/main/mistral-7b-v0.1/README.md",
    ),
}
