"""A decoder-only transformer's architecture and its arithmetic: parameter counts, streamed
weights, KV bytes, and how it splits over tensor-parallel GPUs.

Formulas follow `shared/spec/hardware-models-measurements.md` section 2: a dense decoder is
embedding + layers x (attention + MLP + norms) + final norm (+ an untied LM head); MoE layers
replace the MLP by experts and a router; DeepSeek's MLA caches one compressed latent per layer.
The older layouts (GPT-2, OPT, GPT-NeoX, GPT-J, Falcon, Phi-2) add learned position tables,
LayerNorm biases, biased two-matrix MLPs and biased heads; every such field defaults to the
llama layout, so a catalog entry that does not name it counts as before.
Entries of the catalog (`physics.model_catalog`) and a user's own `config.json`
(`physics.hf_config`) hold only architecture fields; every count is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError
from itlkit.units import Precision

# Routed experts from which an MoE counts as fine-grained (`Model.many_experts`): the
# calibration lends such a model the vLLM MoE cells of its GPU's architecture before a dense
# cell (`physics.calibration.group_keys`).
MANY_EXPERTS = 64


def experts_touched(experts: int, top_k: int, *, tokens):
    """Distinct experts of one MoE layer that `tokens` tokens hit under uniform top-k routing.

    E * (1 - (1 - k/E)^tokens): k at one token, approaching E as the batch grows
    (shared/spec/hardware-models-measurements.md, Mixtral note). Never below k.
    """
    tokens = np.asarray(tokens, dtype=float)
    touched = experts * (1.0 - (1.0 - top_k / experts) ** np.maximum(tokens, 1.0))
    return np.clip(touched, top_k, experts)


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
    qk_norm: bool = False  # Qwen3, Gemma 3: per-head RMSNorm on q and k
    norms_per_layer: int = 2
    norm_bias: bool = False  # LayerNorm with a bias (GPT-2, OPT, GPT-NeoX, GPT-J, Falcon)
    final_norm: bool = True  # OPT-350m (post-norm) has none
    gated_mlp: bool = True  # SwiGLU/GeGLU gate, up, down; False: up, down (GPT-2's 4x GELU)
    mlp_bias: bool = False  # biases on the MLP projections (GPT-2, OPT, GPT-NeoX, GPT-J)
    lm_head_bias: bool = False  # GPT-J, Phi-2
    position_embeddings: int = 0  # learned absolute positions: table rows (OPT: max + 2)
    word_embed_proj_dim: int = 0  # OPT: token embeddings narrower than hidden, projected in/out
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    moe_layer_step: int = 1  # Llama 4, Qwen2-MoE: layer i is MoE when (i + 1) % step == 0
    shared_expert_intermediate_size: int = 0  # Qwen2-MoE; 0: shared experts are expert-sized
    shared_expert_gate: bool = False  # Qwen2-MoE: a sigmoid gate (hidden -> 1) on the shared expert
    expert_bias: bool = False
    router_bias: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int | None = None
    sliding_layers: int = 0
    # What a quantized checkpoint quantizes (the engine step model reads the rest at 16 bits):
    # "linear", every linear layer and the experts (vLLM's FP8, INT8, GPTQ/AWQ methods); or
    # "experts", the routed experts alone (MXFP4: gpt-oss's checkpoints)
    quantized: str = "linear"
    source: str = ""

    # ---- shape -------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def many_experts(self) -> bool:
        """An MoE of many small experts (`MANY_EXPERTS` routed or more: DeepSeek-V3's 256,
        GLM-4.5's 160, gpt-oss-120b's and Qwen3-235B's 128), whose grouped-expert GEMMs run far
        from the roofline; Mixtral's 8 and Llama-4-Scout's 16 wide experts run near it."""
        return self.num_experts >= MANY_EXPERTS

    @property
    def quantizes_experts_only(self) -> bool:
        """Whether a quantized checkpoint of it quantizes its routed experts alone (MXFP4)."""
        return self.quantized == "experts" and self.is_moe

    @property
    def size_class(self) -> str:
        """A coarse class for calibration coverage: MoE, else dense by total parameters."""
        if self.is_moe:
            return "MoE"
        billions = self.total_params / 1e9
        return (
            "dense < 10B" if billions < 10 else "dense 10-40B" if billions < 40 else "dense > 40B"
        )

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is experts: past the first dense ones, every `moe_layer_step`-th."""
        if not self.is_moe:
            return 0
        step = self.moe_layer_step  # layers i + 1 = step, 2 step, ... past the dense ones
        return self.num_layers // step - self.first_dense_layers // step

    @property
    def embed_dim(self) -> int:
        """Width of the token embedding table (OPT-350m: 512 under a 1024-wide model)."""
        return self.word_embed_proj_dim or self.hidden_size

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

    def _mlp_params(self, intermediate: int, *, bias: bool) -> int:
        """Gate (if gated), up and down projections of width `intermediate`, with their biases."""
        h, matrices = self.hidden_size, 3 if self.gated_mlp else 2
        return matrices * h * intermediate + ((matrices - 1) * intermediate + h if bias else 0)

    @property
    def expert_params(self) -> int:
        """One routed expert: gate, up and down projections (SwiGLU), with biases if any."""
        return self._mlp_params(self.moe_intermediate_size, bias=self.expert_bias)

    @property
    def shared_experts_params_per_layer(self) -> int:
        """The always-on shared experts of one MoE layer (and their gate, Qwen2-MoE)."""
        width = self.shared_expert_intermediate_size or self.moe_intermediate_size
        gate = self.hidden_size if self.shared_expert_gate else 0
        return self.num_shared_experts * self._mlp_params(width, bias=self.expert_bias) + gate

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)

    @property
    def dense_mlp_params_per_layer(self) -> int:
        return self._mlp_params(self.intermediate_size, bias=self.mlp_bias)

    @property
    def norm_params(self) -> int:
        """One norm's parameters: a scale, and a bias for LayerNorm."""
        return self.hidden_size * (2 if self.norm_bias else 1)

    def _layer_params(self, *, moe: bool, experts: float) -> float:
        base = self.attention_params_per_layer + self.norms_per_layer * self.norm_params
        if not moe:
            return base + self.dense_mlp_params_per_layer
        return (
            base
            + self.router_params_per_layer
            + self.shared_experts_params_per_layer
            + experts * self.expert_params
        )

    @property
    def embedding_params(self) -> int:
        """The token embedding table (a row gather per token, not a matmul)."""
        return self.vocab_size * self.embed_dim

    @property
    def position_embedding_params(self) -> int:
        """Learned absolute position table (GPT-2, OPT); zero for rotary models."""
        return self.position_embeddings * self.hidden_size

    @property
    def embedding_projection_params(self) -> int:
        """OPT's project_in and project_out (no bias) when the embedding is narrower."""
        return 2 * self.embed_dim * self.hidden_size if self.embed_dim != self.hidden_size else 0

    @property
    def lm_head_params(self) -> int:
        weight = 0 if self.tie_word_embeddings else self.vocab_size * self.embed_dim
        return weight + (self.vocab_size if self.lm_head_bias else 0)

    def _params_with_experts(self, experts: float) -> float:
        dense_layers = self.num_layers - self.moe_layers
        return (
            self.embedding_params
            + self.position_embedding_params
            + self.embedding_projection_params
            + self.lm_head_params
            + (self.norm_params if self.final_norm else 0)
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
        """Distinct experts per MoE layer that `tokens` tokens hit (`experts_touched`)."""
        return experts_touched(self.num_experts, self.experts_per_token, tokens=tokens)

    def streamed_params(self, *, tokens=1, exclude_input_embedding: bool = False):
        """Parameters a step over `tokens` tokens must read from HBM.

        Dense models read everything. MoE models read the experts the batch is expected to touch.
        With `exclude_input_embedding`, an untied input-embedding table and a learned position
        table (row gathers, not streams) are left out; a tied one is still streamed as the LM head.
        """
        tokens = np.asarray(tokens, dtype=float)
        if self.is_moe:
            params = self._params_with_experts(self.expected_experts_touched(tokens=tokens))
        else:
            params = np.full_like(tokens, float(self.total_params))
        if exclude_input_embedding:
            params = params - self.position_embedding_params
            if not self.tie_word_embeddings:
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
