"""The step-time model: what one engine step costs, term by term.

To emit one token per running sequence, a decode step must stream all the weights and each
sequence's cached keys and values out of HBM, so
`(weight bytes + KV bytes) / HBM bandwidth` bounds it from below (the floor). A step that also
carries a prefill chunk multiplies the matmul work; past the roofline ridge its GEMMs turn
compute-bound and every running stream waits for them. Numbers are per GPU under tensor
parallelism. The defaults reproduce `shared/spec/worked-example.txt` exactly; the terms it
leaves out (prefill attention FLOPs, all-reduce latency, host overhead, the untied
input-embedding gather) are separate named terms the user can switch on.

Every function takes numpy arrays as well as scalars, so one call serves a slider and a plot axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit import units
from itlkit.errors import ConfigError
from itlkit.physics.hardware import Hardware, compute_precision, get_gpu, peak_flops_per_second
from itlkit.physics.model import Model, check_tensor_parallel
from itlkit.physics.model_catalog import get_model
from itlkit.units import Precision, format_bytes

ALLREDUCES_PER_LAYER = 2  # after attention and after the MLP (Megatron-style TP)
REFERENCE, ENGINE = "reference", "engine"
STEP_MODELS = (REFERENCE, ENGINE)
INTERCONNECT_KINDS = ("nvlink", "pcie", "network")
# TP across nodes: the all-reduce crosses the nodes' network, here 100 Gb/s Ethernet (one
# direction, 12.5 GB/s); RDMA fabrics are faster (say so with `network_bytes_per_second`).
NETWORK_BYTES_PER_SECOND = 12.5e9
# GPUs one node's scale-up link commonly joins (an 8-GPU HGX or MI300X board): a TP above it
# crosses nodes unless the GPUs sit in a larger NVLink domain (GB200 NVL72). `tp_link_assumption`
# says so where the link is not given.
NODE_SCALE_UP_GPUS = 8
# The engine step model's GEMM efficiency, mfu x n / (n + half): cuBLAS-class kernels reach about
# three quarters of dense peak on a 2,048-token GEMM at LLM shapes (issue 20 measured 61-75 % on
# A100 chunk steps; DeepGEMM's published H800 table: 206 / 352 TFLOPS at M = 64 / 128 and over
# 1,300 at M = 4,096, against 1,979 peak) and far less on a few tokens. `calibrate` fits mfu.
ENGINE_MFU = 0.8
ENGINE_MFU_HALF_TOKENS = 128.0
# MXFP4 (gpt-oss's experts): 4-bit weights, and one uint8 scale per block of 32 of them
# (`w13_weight_scale` of [experts, 2 x intermediate, hidden // 32] uint8, `mxfp4_block = 32`:
# vllm/model_executor/layers/quantization/mxfp4.py @ vllm-project/vllm 007d5005).
MXFP4_SCALE_BYTES_PER_ELEMENT = 1.0 / 32
# vLLM's fused-MoE layer moves its activations once per (token, expert) pair, through three
# caches per layer (`TritonExperts.apply`, vllm/model_executor/layers/fused_moe/fused_moe.py @
# vllm-project/vllm 000d1458): the gate/up GEMM writes intermediate_cache1 (tokens, top-k,
# 2 x intermediate); silu_and_mul reads it and writes intermediate_cache2 (tokens x top-k,
# intermediate); the down GEMM writes intermediate_cache3 (tokens, top-k, hidden); moe_sum reads
# that and writes the layer's output (tokens, hidden). The two elementwise kernels do no math to
# hide their traffic under: per pair 3 x intermediate and one hidden row, and one hidden row per
# token (the GEMMs' own reads and writes overlap their matmuls, as a dense layer's do).
MOE_ELEMENTWISE_WIDTHS = (1, 3)  # hidden rows, intermediate rows per (token, expert) pair


@dataclass(frozen=True)
class Deployment:
    """A model served on one GPU type: precisions, TP degree, efficiency and optional terms."""

    model: Model
    gpu: Hardware
    weights: Precision
    kv: Precision
    tp: int = 1
    mfu: float = 0.5
    exclude_input_embedding: bool = False
    prefill_attention: bool = False
    allreduce: bool = True
    allreduce_latency_seconds: float = 0.0
    host_overhead_seconds: float = 0.0
    host_seconds_per_sequence: float = 0.0
    activation_bytes_per_element: float = 2.0
    gpu_memory_utilization: float = 0.9
    step_model: str = REFERENCE  # or ENGINE: the terms vLLM computes (`as_engine`)
    mfu_half_tokens: float = 0.0  # engine: a GEMM over n tokens reaches mfu x n / (n + this)
    interconnect: str | None = None  # None: the GPU's own link; or one of INTERCONNECT_KINDS
    network_bytes_per_second: float = NETWORK_BYTES_PER_SECOND
    # The share of the GPU's datasheet PCIe bandwidth (one direction) TP's all-reduce bytes
    # reach over PCIe (a calibration's `pcie_bandwidth_share`; 1: the datasheet)
    pcie_bandwidth_share: float = 1.0

    @classmethod
    def create(
        cls,
        *,
        model: str | Model,
        gpu: str | Hardware,
        weight_precision: str | Precision = "bf16",
        kv_precision: str | Precision = "bf16",
        tp: int = 1,
        mfu: float = 0.5,
        **terms,
    ) -> Deployment:
        """Build and validate a deployment from catalog names (or a config.json path)."""
        deployment = cls(
            model=get_model(model),
            gpu=get_gpu(gpu),
            weights=units.weight_precision(weight_precision),
            kv=units.kv_precision(kv_precision),
            tp=tp,
            mfu=mfu,
            **terms,
        )
        deployment.validate()
        return deployment

    def validate(self) -> None:
        """Raise ConfigError for settings that cannot describe a real deployment."""
        check_tensor_parallel(self.model, tp=self.tp)
        if not 0 < self.mfu <= 1:
            raise ConfigError(f"MFU must be in (0, 1], got {self.mfu}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"GPU memory utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.step_model not in STEP_MODELS:
            raise ConfigError(f"step model must be one of {', '.join(STEP_MODELS)}, "
                              f"got {self.step_model!r}")  # fmt: skip
        if self.interconnect is not None and self.interconnect not in INTERCONNECT_KINDS:
            raise ConfigError(f"interconnect must be one of {', '.join(INTERCONNECT_KINDS)}, "
                              f"got {self.interconnect!r}")  # fmt: skip
        if not (self.network_bytes_per_second > 0 and math.isfinite(self.network_bytes_per_second)):
            raise ConfigError("network_bytes_per_second must be a finite number > 0")
        if not 0 < self.pcie_bandwidth_share <= 1:
            raise ConfigError("pcie_bandwidth_share must be > 0 and at most 1")
        for name in (
            "mfu_half_tokens",
            "host_overhead_seconds",
            "host_seconds_per_sequence",
            "allreduce_latency_seconds",
        ):
            if getattr(self, name) < 0 or not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} must be a finite number >= 0")

    def as_engine(self, *, mfu: float = ENGINE_MFU,
                  half_tokens: float = ENGINE_MFU_HALF_TOKENS) -> Deployment:  # fmt: skip
        """The same deployment priced as vLLM computes a step (`StepCoefficients`: the engine
        terms): embeddings gathered, logits only at sampled positions, prefill attention counted,
        GEMM efficiency by token count, and GPU efficiency applied to memory traffic only."""
        return replace(self, step_model=ENGINE, mfu=mfu, mfu_half_tokens=half_tokens,
                       exclude_input_embedding=True, prefill_attention=True)  # fmt: skip

    @property
    def is_engine(self) -> bool:
        return self.step_model == ENGINE

    @property
    def link_kind(self) -> str:
        """'nvlink' (a scale-up link: NVLink, Infinity Fabric), 'pcie' or 'network'."""
        if self.interconnect is not None:
            return self.interconnect
        return "nvlink" if self.gpu.interconnect_bytes_per_second_bidir else "pcie"

    @property
    def link_bytes_per_second(self) -> float:
        """One direction of the link the all-reduces cross."""
        if self.link_kind == "network":
            return self.network_bytes_per_second
        if self.link_kind == "pcie":
            return self.gpu.pcie_bytes_per_second * self.pcie_bandwidth_share
        return self.gpu.link_bytes_per_second

    @property
    def label(self) -> str:
        tp = f" x{self.tp} (TP)" if self.tp > 1 else ""
        return f"{self.model.slug} {self.weights.name} on {self.gpu.slug}{tp}"

    @property
    def peak_flops_per_second(self) -> float:
        """Dense tensor peak for this weight precision on one GPU."""
        return peak_flops_per_second(self.gpu, self.weights)

    @property
    def compute_precision(self) -> str:
        return compute_precision(self.gpu, self.weights)

    @property
    def ridge_flops_per_byte(self) -> float:
        """Roofline ridge: peak FLOP/s / HBM bytes/s (989 TFLOP/s / 3.35 TB/s = 295 FLOP/B)."""
        return self.peak_flops_per_second / self.gpu.hbm_bytes_per_second

    def weight_bytes_per_gpu(self, *, tokens=1):
        """Weight bytes one GPU streams in a step over `tokens` tokens (MoE: experts touched).
        Engine model with quantized weights: what vLLM's quantization method leaves alone
        streams at the activations' precision (`_checkpoint_bytes`), MXFP4's experts with
        their scales."""
        params = self.model.streamed_params(
            tokens=tokens, exclude_input_embedding=self.exclude_input_embedding
        )
        if not self.is_engine:
            return params * self.weights.bytes_per_element / self.tp
        m = self.model
        touched = m.expected_experts_touched(tokens=tokens) if m.is_moe else 0.0
        return self._checkpoint_bytes(params, experts=touched, tables=self.lm_head_matrix_params)

    def resident_weight_bytes_per_gpu(self) -> float:
        """Weight bytes one GPU holds as vLLM loads the checkpoint (what its KV cache is sized
        after): every parameter, what vLLM's quantization method leaves alone at 16 bits (both
        tables, one where they are tied; under MXFP4 everything but the experts)."""
        m = self.model
        tables = m.embedding_params + m.lm_head_params  # the head: 0 when tied to the input
        return self._checkpoint_bytes(float(m.total_params), experts=m.num_experts, tables=tables)

    def _checkpoint_bytes(self, params, *, experts, tables) -> float:
        """Bytes per GPU of `params` parameters of a checkpoint at the run's precision, of which
        `tables` (the embedding tables among them) stay at 16 bits, or under MXFP4 all but the
        routed experts (`experts` per MoE layer among them), which carry one 8-bit scale per 32
        weights (`MXFP4_SCALE_BYTES_PER_ELEMENT`). vLLM's quantization methods act on LinearBase,
        FusedMoE and Attention layers (`Fp8Config.get_quant_method`, vllm/model_executor/layers/
        quantization/fp8.py @ vllm-project/vllm 0071b24b; the tables are VocabParallelEmbedding
        layers); MXFP4's returns UnquantizedLinearMethod for every LinearBase
        (`Mxfp4Config.get_quant_method`, mxfp4.py @ 007d5005)."""
        quantized, full = self.weights.bytes_per_element, self.activation_bytes_per_element
        if quantized >= full:
            return params * quantized / self.tp
        m = self.model
        if m.quantizes_experts_only:
            tables = params - m.moe_layers * experts * m.expert_params
            if quantized == 0.5:  # MXFP4's 4 bits
                quantized += MXFP4_SCALE_BYTES_PER_ELEMENT
        return ((params - tables) * quantized + tables * full) / self.tp

    @property
    def lm_head_matrix_params(self) -> float:
        """The LM head's matrix (the tied embedding table, or the untied head): vocab x width."""
        return float(self.model.vocab_size * self.model.embed_dim)

    @property
    def expert_params_per_token(self) -> float:
        """Routed-expert parameters one token multiplies through (0 for a dense model)."""
        m = self.model
        return float(m.moe_layers * m.experts_per_token * m.expert_params) if m.is_moe else 0.0

    @property
    def engine_dense_params(self) -> float:
        """Parameters every token of an engine step multiplies through, outside the routed
        experts and the LM head: the gathered embeddings are not matmuls."""
        m = self.model
        gathered = m.embedding_params + m.position_embedding_params
        head = m.lm_head_params  # the untied head (0 when tied: it is the gathered table)
        return float(m.active_params - gathered - head - self.expert_params_per_token)

    @property
    def matmul_params(self) -> float:
        """Parameters each token multiplies through (active parameters for MoE)."""
        params = float(self.model.active_params)
        if self.exclude_input_embedding and not self.model.tie_word_embeddings:
            params -= self.model.embedding_params
        return params

    def kv_bytes_per_sequence_per_gpu(self, *, context_tokens):
        """KV bytes one GPU holds (and a decode step reads) for one sequence."""
        per_sequence = self.model.kv_bytes(self.kv, context_tokens=context_tokens)
        return per_sequence * self.model.kv_fraction_per_gpu(tp=self.tp)

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token adds on one GPU, ignoring sliding windows."""
        return self.model.kv_bytes_per_token(self.kv) * self.model.kv_fraction_per_gpu(tp=self.tp)


@dataclass(frozen=True)
class StepTime:
    """One engine step decomposed into named terms (SI units, per GPU; arrays broadcast)."""

    batch_size: np.ndarray | float
    context_tokens: np.ndarray | float
    chunk_tokens: np.ndarray | float
    tokens: np.ndarray | float
    weight_bytes: np.ndarray | float
    kv_bytes: np.ndarray | float
    weight_read_seconds: np.ndarray | float
    kv_read_seconds: np.ndarray | float
    floor_seconds: np.ndarray | float
    matmul_flops: np.ndarray | float
    matmul_seconds: np.ndarray | float
    prefill_attention_flops: np.ndarray | float
    prefill_attention_seconds: np.ndarray | float
    allreduce_bytes: np.ndarray | float
    allreduce_seconds: np.ndarray | float
    host_overhead_seconds: np.ndarray | float
    step_seconds: np.ndarray | float
    compute_bound: np.ndarray | bool
    moe_elementwise_seconds: np.ndarray | float = 0.0  # after the GEMMs (`moe_elementwise_bytes`)

    @property
    def over_floor(self):
        """How many times the bandwidth floor this step takes."""
        return _out(np.asarray(self.step_seconds) / np.asarray(self.floor_seconds))

    @property
    def gemm_seconds(self):
        """The GEMM phase: the slower of streaming the weights and doing the matmul FLOPs."""
        return _out(np.maximum(self.weight_read_seconds, self.matmul_seconds))

    @property
    def arithmetic_intensity_flops_per_byte(self):
        """Matmul FLOPs per byte the step moves (weights + KV): its x on the roofline."""
        return _out(np.asarray(self.matmul_flops) / (np.asarray(self.weight_bytes) + self.kv_bytes))

    @property
    def attained_flops_per_second(self):
        """Matmul FLOPs per second of the whole step: its y on the roofline."""
        return _out(np.asarray(self.matmul_flops) / np.asarray(self.step_seconds))


def tp_link_assumption(dep: Deployment) -> str | None:
    """The sentence to print where TP exceeds NODE_SCALE_UP_GPUS and no link is given: its
    all-reduces are priced over the GPU's own link, as if one domain joined every GPU."""
    if dep.tp <= NODE_SCALE_UP_GPUS or dep.interconnect is not None or dep.link_kind != "nvlink":
        return None
    return (f"TP {dep.tp}'s all-reduces are priced over the {dep.gpu.slug}'s own link, as if one "
            f"NVLink domain joined all {dep.tp} GPUs; a node's link commonly joins "
            f"{NODE_SCALE_UP_GPUS} (HGX and MI300X boards), so across nodes pass "
            "--interconnect network (runs: interconnect \"network\")")  # fmt: skip


def _out(value):
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return array


def _positive(name: str, value, *, allow_zero: bool = False):
    array = np.asarray(value, dtype=float)
    bad = ~np.isfinite(array) | ((array < 0) if allow_zero else (array <= 0))
    if np.any(bad):
        bound = ">= 0" if allow_zero else "> 0"
        shown = array[bad].flat[0] if array.ndim else float(array)
        raise ConfigError(f"{name} must be a finite number {bound}, got {shown:g}")
    return array


@dataclass(frozen=True, slots=True)
class StepCoefficients:
    """The step-time formula's constants for one deployment, computed once (per GPU, SI units).

    step = (max(weight read, matmul) + KV read + prefill attention + all-reduce) / efficiency
           + host overhead + host seconds per sequence x sequences in the step
    with weight read = weight bytes / HBM bandwidth, matmul = FLOPs per token x tokens / (MFU x
    peak), KV read = KV bytes / HBM bandwidth, prefill attention = its FLOPs / (MFU x peak) and
    all-reduce = bytes per token x tokens / link bandwidth + a latency per call. Each time is
    bytes (or FLOPs) over a rate, as the worked example divides them, so every caller gets the
    same floats: `step_time`, `step_seconds` and the simulator's step function.
    """

    weight_read_seconds: float  # dense: every step streams all weights (MoE: see weight_read)
    matmul_flops_per_token: float
    flops_per_second: float  # MFU x dense peak for the weight precision
    kv_bytes_per_token: float
    hbm_bytes_per_second: float
    attention_flops_per_token_pair: float  # 0 unless prefill attention is on
    allreduce_bytes_per_token: float
    link_bytes_per_second: float
    allreduce_seconds_per_step: float  # the latency of every all-reduce call in a step
    host_overhead_seconds: float
    host_seconds_per_sequence: float = 0.0  # scheduling, sampling, detokenising one sequence
    efficiency: float = 1.0
    moe: Deployment | None = None  # weight bytes depend on the experts a step touches
    # The engine terms (`Deployment.as_engine`); all zero in the reference model, where
    # matmul_flops_per_token covers every parameter of every token.
    engine: bool = False
    head_flops_per_sequence: float = 0.0  # the LM head, once per sampled position
    expert_flops_per_token: float = 0.0  # routed experts, in GEMMs of tokens x share rows
    expert_token_share: float = 1.0  # top-k / experts: the rows one expert's GEMM gets
    mfu_half_tokens: float = 0.0
    # Sliding-window layers (gpt-oss, Gemma 2): a decode reads, and a prefill token attends
    # to, only the last `window_tokens` of its sequence there. Their share of the KV bytes per
    # token and of the attention FLOPs per pair; 0 for a model without such layers.
    window_tokens: float = 0.0
    window_kv_bytes_per_token: float = 0.0
    window_attention_flops_per_token_pair: float = 0.0
    # MoE: the fused-MoE layers' elementwise kernels' bytes per token (`moe_elementwise_bytes`)
    moe_elementwise_bytes_per_token: float = 0.0

    def weight_read(self, tokens):
        """Seconds to stream the weights a step over `tokens` tokens reads."""
        if self.moe is None:
            return self.weight_read_seconds
        return self.moe.weight_bytes_per_gpu(tokens=tokens) / self.hbm_bytes_per_second

    def gemm_efficiency(self, rows):
        """Share of the MFU a GEMM over `rows` tokens reaches: n / (n + half) in the engine
        model (a fixed cost of `half` rows: tiles, waves, the weight stream); 1 in the reference."""
        if not self.engine:
            return 1.0
        rows = np.maximum(rows, 1.0)
        return rows / (rows + self.mfu_half_tokens)

    def matmul_seconds(self, tokens, sequences=0):
        """The step's GEMMs at their MFU. Engine model: the dense GEMMs over every token, the
        LM head over the sampled positions (`sequences`), the experts over their share."""
        if not self.engine:
            return self.matmul_flops_per_token * tokens / self.flops_per_second
        # n rows at n / (n + half) of the MFU take as long as n + half rows at the MFU.
        dense = self.matmul_flops_per_token * self._padded(tokens)
        head = self.head_flops_per_sequence * self._padded(sequences)
        return (dense + head + self.padded_expert_flops(tokens)) / self.flops_per_second

    def padded_expert_flops(self, tokens):
        """Engine model: the routed experts' FLOPs, each expert's rows padded by `half`."""
        share = self.expert_token_share
        return self.expert_flops_per_token * self._padded(tokens * share) / share

    def _padded(self, rows):
        """Rows a GEMM over `rows` rows costs at full MFU: rows + half (none for none)."""
        if isinstance(rows, np.ndarray):
            return np.where(rows > 0, rows + self.mfu_half_tokens, 0.0)
        return rows + self.mfu_half_tokens if rows > 0 else 0.0

    def matmul_flops(self, tokens, sequences=0):
        return (self.matmul_flops_per_token + self.expert_flops_per_token) * tokens + (
            self.head_flops_per_sequence * sequences
        )

    def kv_read_seconds(self, kv_bytes):
        return kv_bytes / self.hbm_bytes_per_second

    def moe_elementwise_seconds(self, tokens):
        """Seconds of the fused-MoE layers' activation and sum kernels over `tokens` tokens."""
        return self.moe_elementwise_bytes_per_token * tokens / self.hbm_bytes_per_second

    def decode_kv_bytes(self, kv_tokens, sequences):
        """KV bytes the decodes of a step read, their contexts summing to `kv_tokens`. A
        sliding-window layer reads at most the window of each of the step's `sequences`:
        min(kv_tokens, sequences x window) there, exact when every context is past the window
        or none is, an upper bound between."""
        if not self.window_kv_bytes_per_token:
            return self.kv_bytes_per_token * kv_tokens
        window = self.window_kv_bytes_per_token
        held = np.minimum(kv_tokens, sequences * self.window_tokens)
        return (self.kv_bytes_per_token - window) * kv_tokens + window * held

    def attention_flops(self, *, chunk_tokens, prior_tokens=0):
        """Causal attention FLOPs of a prefill chunk: per pair x chunk x (prior + chunk / 2);
        in a sliding-window layer each position attends to at most the window."""
        pair = self.attention_flops_per_token_pair
        if not self.window_attention_flops_per_token_pair:
            return pair * chunk_tokens * (prior_tokens + chunk_tokens / 2.0)
        window = self.window_attention_flops_per_token_pair
        full = (pair - window) * chunk_tokens * (prior_tokens + chunk_tokens / 2.0)
        return full + window * _window_pairs(chunk_tokens, prior_tokens, self.window_tokens)

    def allreduce_bytes(self, tokens):
        return self.allreduce_bytes_per_token * tokens

    def allreduce_seconds(self, tokens):
        return (
            self.allreduce_bytes(tokens) / self.link_bytes_per_second
            + self.allreduce_seconds_per_step
        )

    def host_seconds(self, sequences=0):
        """The host's share of a step that carries `sequences` sequences."""
        return self.host_overhead_seconds + self.host_seconds_per_sequence * sequences

    def total(self, weight, matmul, kv, attention, allreduce, maximum=np.maximum, sequences=0):
        """The step from its terms (`maximum=max` for Python floats, as the simulator calls it).

        Reference model: every GPU term divides by the efficiency. Engine model: the GEMMs and
        attention are already at their MFU, so the efficiency divides the memory and link
        traffic only."""
        if self.engine:
            e = self.efficiency
            gpu = maximum(weight / e, matmul) + (kv + allreduce) / e + attention
            return gpu + self.host_seconds(sequences)
        gpu = maximum(weight, matmul) + kv + attention + allreduce
        return gpu / self.efficiency + self.host_seconds(sequences)

    def seconds(self, tokens, kv_tokens, attention_flops=0.0, maximum=np.maximum, sequences=0,
                weight_read=None):  # fmt: skip
        """The step over `tokens` tokens whose decodes hold `kv_tokens` of context in all
        (`weight_read`: `self.weight_read(tokens)` where the caller already has it)."""
        kv = self.kv_read_seconds(self.decode_kv_bytes(kv_tokens, sequences))
        if self.moe_elementwise_bytes_per_token:
            kv = kv + self.moe_elementwise_seconds(tokens)
        return self.total(
            self.weight_read(tokens) if weight_read is None else weight_read,
            self.matmul_seconds(tokens, sequences),
            kv,
            attention_flops / self.flops_per_second,
            self.allreduce_seconds(tokens),
            maximum,
            sequences,
        )


def step_coefficients(
    deployment: Deployment, *, efficiency: float = 1.0, host_overhead_seconds: float | None = None
) -> StepCoefficients:
    """The constants of `step_time`'s formula for this deployment (host overhead overridable)."""
    dep = deployment
    m = dep.model
    if m.is_mla:
        qk_dim, v_dim = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    else:
        qk_dim = v_dim = m.attention_head_dim
    pair = 2.0 * m.num_layers * m.num_attention_heads * (qk_dim + v_dim) / dep.tp
    allreduce = dep.allreduce and dep.tp > 1
    count = ALLREDUCES_PER_LAYER * m.num_layers
    per_token = (
        count * 2.0 * (dep.tp - 1) / dep.tp * m.hidden_size * dep.activation_bytes_per_element
    )
    host = dep.host_overhead_seconds if host_overhead_seconds is None else host_overhead_seconds
    engine = _engine_terms(dep) if dep.is_engine else {}
    return StepCoefficients(
        weight_read_seconds=float(dep.weight_bytes_per_gpu(tokens=1))
        / dep.gpu.hbm_bytes_per_second,
        matmul_flops_per_token=engine.pop("dense", 2.0 * dep.matmul_params / dep.tp),
        flops_per_second=dep.mfu * dep.peak_flops_per_second,
        kv_bytes_per_token=dep.kv_bytes_per_token_per_gpu,
        hbm_bytes_per_second=dep.gpu.hbm_bytes_per_second,
        attention_flops_per_token_pair=pair if dep.prefill_attention else 0.0,
        allreduce_bytes_per_token=per_token if allreduce else 0.0,
        link_bytes_per_second=dep.link_bytes_per_second,
        allreduce_seconds_per_step=count * dep.allreduce_latency_seconds if allreduce else 0.0,
        host_overhead_seconds=float(host),
        host_seconds_per_sequence=float(dep.host_seconds_per_sequence),
        efficiency=float(efficiency),
        moe=dep if m.is_moe else None,
        **_window_terms(dep, pair if dep.prefill_attention else 0.0),
        moe_elementwise_bytes_per_token=moe_elementwise_bytes(dep),
        **engine,
    )


def moe_elementwise_bytes(dep: Deployment) -> float:
    """Bytes per token one GPU's fused-MoE elementwise kernels move over all the MoE layers
    (`MOE_ELEMENTWISE_WIDTHS`): top-k pairs per token, TP splitting the experts' intermediate
    width, at the activations' precision; 0 for a dense model."""
    m = dep.model
    if not m.is_moe:
        return 0.0
    rows, widths = MOE_ELEMENTWISE_WIDTHS
    per_pair = rows * m.hidden_size + widths * m.moe_intermediate_size / dep.tp
    per_token = m.experts_per_token * per_pair + m.hidden_size
    return m.moe_layers * dep.activation_bytes_per_element * per_token


def _window_terms(dep: Deployment, pair: float) -> dict:
    """The sliding-window layers' share of the KV bytes per token and of the attention FLOPs
    per pair (`StepCoefficients`). vLLM passes a layer's window to the attention kernel
    (`FlashAttentionImpl`: `self.sliding_window = (sliding_window - 1, 0)`, given as
    `window_size` to `flash_attn_varlen_func`, vllm/v1/attention/backends/flash_attn.py @
    vllm-project/vllm 0084b783), which visits only the keys inside it."""
    m = dep.model
    if not (m.sliding_layers and m.sliding_window):
        return {}
    share = m.sliding_layers / m.num_layers
    return {
        "window_tokens": float(m.sliding_window),
        "window_kv_bytes_per_token": dep.kv_bytes_per_token_per_gpu * share,
        "window_attention_flops_per_token_pair": pair * share,
    }


def _window_pairs(chunk, prior, window):
    """(query, key) pairs of a causal chunk of `chunk` positions after `prior` cached ones
    when each attends to at most `window` keys, in `attention_flops`' continuous form (no
    window: chunk x (prior + chunk / 2))."""
    end = prior + chunk
    low, high = np.minimum(prior, window), np.minimum(end, window)
    return (high * high - low * low) / 2.0 + window * np.maximum(end - np.maximum(prior, window), 0)


def _engine_terms(dep: Deployment) -> dict:
    """The engine model's GEMM split, per GPU (vLLM shards the LM head and the experts by TP)."""
    m = dep.model
    return {
        "engine": True,
        "dense": 2.0 * dep.engine_dense_params / dep.tp,
        "head_flops_per_sequence": 2.0 * dep.lm_head_matrix_params / dep.tp,
        "expert_flops_per_token": 2.0 * dep.expert_params_per_token / dep.tp,
        "expert_token_share": m.experts_per_token / m.num_experts if m.is_moe else 1.0,
        "mfu_half_tokens": float(dep.mfu_half_tokens),
    }


def _batch(dep: Deployment, batch_size, context_tokens, request_context_tokens):
    """(batch, mean context, KV bytes the decodes read) from an even or an uneven batch."""
    if request_context_tokens is not None:
        contexts = _positive("request context tokens", request_context_tokens)
        if contexts.ndim != 1 or contexts.size == 0:
            raise ConfigError("request_context_tokens must be a non-empty 1-D list of contexts")
        kv_bytes = np.sum(dep.kv_bytes_per_sequence_per_gpu(context_tokens=contexts))
        return np.asarray(float(contexts.size)), np.asarray(contexts.mean()), kv_bytes
    if batch_size is None or context_tokens is None:
        raise ConfigError("give batch_size and context_tokens, or request_context_tokens")
    batch = _positive("batch size", batch_size)
    context = _positive("context tokens", context_tokens)
    return batch, context, batch * dep.kv_bytes_per_sequence_per_gpu(context_tokens=context)


def step_time(
    deployment: Deployment,
    *,
    batch_size=None,
    context_tokens=None,
    chunk_tokens=0,
    chunk_context_tokens=0,
    request_context_tokens=None,
) -> StepTime:
    """Decompose one engine step: `batch_size` decodes at `context_tokens` plus a prefill chunk.

    step = max(weight read, matmul FLOPs at MFU) + decode KV read + prefill attention
           + all-reduce + host overhead           (worked example: 68.6 + 10.3 = 79 ms)

    `request_context_tokens` (one context per running request) replaces batch_size and
    context_tokens when the batch is uneven. `chunk_context_tokens` is how much of the chunk's
    own prompt is already cached (it matters only to the prefill-attention term).
    """
    dep = deployment
    c = step_coefficients(dep)
    batch, context, kv_bytes = _batch(dep, batch_size, context_tokens, request_context_tokens)
    chunk = _positive("chunk tokens", chunk_tokens, allow_zero=True)
    prior = _positive("chunk context tokens", chunk_context_tokens, allow_zero=True)
    tokens = batch + chunk
    sequences = batch + (chunk > 0)
    weight_read = np.broadcast_to(c.weight_read(tokens), np.shape(tokens)).astype(float)
    kv_read = c.kv_read_seconds(kv_bytes)
    matmul_seconds = c.matmul_seconds(tokens, sequences)
    attention_flops = c.attention_flops(chunk_tokens=chunk, prior_tokens=prior)
    attention_seconds = attention_flops / c.flops_per_second
    allreduce_seconds = np.broadcast_to(c.allreduce_seconds(tokens), np.shape(tokens))
    host = c.host_seconds(sequences)
    moe_elementwise = c.moe_elementwise_seconds(tokens)
    step = c.total(
        weight=weight_read,
        matmul=matmul_seconds,
        kv=kv_read + moe_elementwise,
        attention=attention_seconds,
        allreduce=allreduce_seconds,
        sequences=sequences,
    )
    return StepTime(
        batch_size=_out(batch),
        context_tokens=_out(context),
        chunk_tokens=_out(chunk),
        tokens=_out(tokens),
        weight_bytes=_out(dep.weight_bytes_per_gpu(tokens=tokens)),
        kv_bytes=_out(kv_bytes),
        weight_read_seconds=_out(weight_read),
        kv_read_seconds=_out(kv_read),
        floor_seconds=_out(weight_read + kv_read),
        matmul_flops=_out(c.matmul_flops(tokens, sequences)),
        matmul_seconds=_out(matmul_seconds),
        prefill_attention_flops=_out(attention_flops),
        prefill_attention_seconds=_out(attention_seconds),
        allreduce_bytes=_out(c.allreduce_bytes(tokens)),
        allreduce_seconds=_out(allreduce_seconds),
        host_overhead_seconds=_out(np.broadcast_to(host, np.shape(tokens)).astype(float)),
        step_seconds=_out(step),
        compute_bound=_out(matmul_seconds > weight_read),
        moe_elementwise_seconds=_out(moe_elementwise),
    )


def decode_step(deployment: Deployment, *, batch_size=None, context_tokens=None, **kwargs):
    """A pure decode step (no prefill chunk); its `floor_seconds` is the bandwidth floor."""
    return step_time(
        deployment, batch_size=batch_size, context_tokens=context_tokens, chunk_tokens=0, **kwargs
    )


def mixed_step(deployment: Deployment, *, batch_size, context_tokens, chunk_tokens, **kwargs):
    """A decode step that also carries a `chunk_tokens` prefill chunk (worked example: 79 ms)."""
    return step_time(
        deployment,
        batch_size=batch_size,
        context_tokens=context_tokens,
        chunk_tokens=chunk_tokens,
        **kwargs,
    )


def step_seconds(deployment: Deployment, *, decode_tokens: int, prefill_tokens: int, kv_tokens):
    """Step time from token counts (`kv_tokens`: the decodes' summed context): `step_time`'s
    formula through the same `StepCoefficients` (KV linear in tokens, so sliding windows must be
    clipped by the caller; prefill attention counted as if the chunk starts its prompt)."""
    c = step_coefficients(deployment)
    tokens = decode_tokens + prefill_tokens
    if tokens <= 0:
        return c.host_overhead_seconds
    attention = c.attention_flops(chunk_tokens=prefill_tokens) if prefill_tokens else 0.0
    sequences = decode_tokens + (prefill_tokens > 0)
    return float(c.seconds(tokens, kv_tokens, attention, sequences=sequences))


def prefill_attention_flops(deployment: Deployment, *, chunk_tokens, prior_tokens=0):
    """Causal attention FLOPs of a prefill chunk, per GPU (off by default, as in the example).

    QK^T and PV: 2 x L x heads x (d_qk + d_v) x chunk x (prior + chunk/2).
    """
    c = step_coefficients(replace(deployment, prefill_attention=True))
    chunk = np.asarray(chunk_tokens, dtype=float)
    return c.attention_flops(chunk_tokens=chunk, prior_tokens=np.asarray(prior_tokens, dtype=float))


def allreduce_cost(deployment: Deployment, *, tokens):
    """Bytes each GPU sends and seconds spent in the step's all-reduces under TP.

    Ring all-reduce: 2 (tp - 1) / tp x message bytes over one direction of the scale-up link,
    two all-reduces per layer of tokens x hidden activations, plus a fixed latency each.
    """
    c = step_coefficients(replace(deployment, allreduce=True))
    tokens = np.asarray(tokens, dtype=float)
    return c.allreduce_bytes(tokens), c.allreduce_seconds(tokens)


def ridge_tokens_per_step(deployment: Deployment) -> float:
    """Tokens per step at which the GEMMs' intensity reaches the ridge (dense BF16: 295).

    Intensity of a step's GEMMs = 2 x matmul params x tokens / weight bytes streamed.
    """
    return _crossing(deployment, efficiency=1.0)


def compute_bound_tokens_per_step(deployment: Deployment) -> float:
    """Tokens per step past which the GEMMs take longer than streaming the weights at this MFU."""
    return _crossing(deployment, efficiency=deployment.mfu)


def _crossing(dep: Deployment, *, efficiency: float) -> float:
    def excess(tokens: float) -> float:
        flops_time = 2.0 * dep.matmul_params * tokens / dep.tp
        flops_time /= efficiency * dep.peak_flops_per_second
        return flops_time - float(dep.weight_bytes_per_gpu(tokens=tokens)) / (
            dep.gpu.hbm_bytes_per_second
        )

    if not dep.model.is_moe:
        # Linear in tokens for a dense model: solve directly.
        per_token = excess(1.0) - excess(0.0)
        return -excess(0.0) / per_token
    low, high = 0.0, 1.0
    while excess(high) < 0:
        low, high = high, high * 2
        if high > 1e9:
            return math.inf
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if excess(mid) < 0 else (low, mid)
    return high


def mbu(*, floor_seconds, measured_seconds):
    """Memory-bandwidth utilisation of a measured step: floor / measured (24 ms -> 63%)."""
    measured = _positive("measured step seconds", measured_seconds)
    return _out(np.asarray(floor_seconds, dtype=float) / measured)


@dataclass(frozen=True)
class PrefillCost:
    """What prefilling one prompt in chunks costs: steps, their time, and each step's length."""

    prompt_tokens: int
    chunk_tokens: int
    steps: int
    seconds: float
    step_seconds: tuple[float, ...]


def prefill_cost(
    deployment: Deployment,
    *,
    prompt_tokens: int,
    chunk_tokens: int,
    batch_size: int = 0,
    context_tokens: int = 0,
) -> PrefillCost:
    """Steps and time to prefill a prompt at a token budget per step, beside running decodes.

    steps = ceil(prompt / chunk) (4,096 tokens: 2 steps at 2,048, 8 at 512): the TTFT price
    of a smaller budget. Each step carries the running batch's decodes too.
    """
    prompt = int(_positive("prompt tokens", prompt_tokens))
    chunk = int(_positive("chunk tokens", chunk_tokens))
    steps = -(-prompt // chunk)
    sizes = [min(chunk, prompt - i * chunk) for i in range(steps)]
    times = []
    for i, size in enumerate(sizes):
        if batch_size:
            step = mixed_step(
                deployment,
                batch_size=batch_size,
                context_tokens=context_tokens,
                chunk_tokens=size,
                chunk_context_tokens=i * chunk,
            )
            times.append(float(step.step_seconds))
        else:
            seconds = step_seconds(deployment, decode_tokens=0, prefill_tokens=size, kv_tokens=0)
            times.append(float(seconds))
    return PrefillCost(prompt, chunk, steps, float(sum(times)), tuple(times))


@dataclass(frozen=True)
class Capacity:
    """Does the deployment fit in HBM, and how many sequences of a context fit beside it."""

    hbm_bytes: float
    usable_bytes: float
    weight_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_sequence: float
    max_sequences: int
    weights_fit: bool

    def fits(self, *, batch_size: int) -> bool:
        return self.weights_fit and batch_size <= self.max_sequences

    def explain(self, *, batch_size: int) -> str:
        """A sentence saying whether `batch_size` sequences fit, with the numbers."""
        if not self.weights_fit:
            return (
                f"weights need {format_bytes(self.weight_bytes)} per GPU but only "
                f"{format_bytes(self.usable_bytes)} of {format_bytes(self.hbm_bytes)} HBM is "
                "usable: raise TP or quantize the weights"
            )
        need = batch_size * self.kv_bytes_per_sequence
        verdict = "fits" if self.fits(batch_size=batch_size) else "does not fit"
        return (
            f"{batch_size} sequences need {format_bytes(need)} of KV per GPU; "
            f"{format_bytes(self.kv_budget_bytes)} is left after weights, room for "
            f"{self.max_sequences} sequences: {verdict}"
        )


def capacity(deployment: Deployment, *, context_tokens) -> Capacity:
    """HBM budget: usable = HBM x utilisation; KV budget = usable - weights (per GPU)."""
    dep = deployment
    context = float(_positive("context tokens", context_tokens))
    usable = dep.gpu.hbm_bytes * dep.gpu_memory_utilization
    # Every weight is resident, experts included, whatever a step happens to read.
    weights = dep.model.total_params * dep.weights.bytes_per_element / dep.tp
    budget = usable - weights
    per_sequence = float(dep.kv_bytes_per_sequence_per_gpu(context_tokens=context))
    max_sequences = int(budget // per_sequence) if budget > 0 else 0
    return Capacity(
        hbm_bytes=dep.gpu.hbm_bytes,
        usable_bytes=usable,
        weight_bytes=weights,
        kv_budget_bytes=budget,
        kv_bytes_per_sequence=per_sequence,
        max_sequences=max_sequences,
        weights_fit=budget > 0,
    )


def check_fits(deployment: Deployment, *, batch_size: int, context_tokens) -> Capacity:
    """Raise ConfigError when weights + KV for this batch do not fit in GPU memory."""
    cap = capacity(deployment, context_tokens=context_tokens)
    if not cap.fits(batch_size=int(batch_size)):
        raise ConfigError(
            f"{deployment.label} at batch {batch_size}, context {context_tokens}: "
            + cap.explain(batch_size=int(batch_size))
        )
    return cap
