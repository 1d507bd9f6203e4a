"""The decomposition as a worked answer: each line a quantity, its formula and its value.

`itlkit explain` prints these lines; notebooks show them as a table. Values are SI in
`Explanation.values` (the CLI's `--json`), friendly units only in the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from itlkit.physics.calibration import Calibration
from itlkit.physics.engine_memory import vllm_kv_cache
from itlkit.physics.hardware import MAMF_BF16_FLOPS_PER_SECOND, achievable_matmul_share
from itlkit.physics.moe_kernel import (
    FUSED_MOE_BANDWIDTH_SHARE,
    FUSED_MOE_SHARE_OF_BF16_PEAK,
    MoeKernelShape,
    fused_moe_seconds,
    measured_kernel_applies,
)
from itlkit.physics.roofline import (
    ALLREDUCES_PER_LAYER,
    Deployment,
    StepTime,
    capacity,
    compute_bound_tokens_per_step,
    decode_step,
    mbu,
    mixed_step,
    moe_elementwise_bytes,
    prefill_cost,
    ridge_tokens_per_step,
    step_coefficients,
)
from itlkit.physics.speculative import Speculation, crossover_batch, speculative_step
from itlkit.units import (
    format_bandwidth,
    format_bytes,
    format_flops,
    format_percent,
    format_rate,
    format_seconds,
)


@dataclass(frozen=True)
class ExplainLine:
    """One line of the worked answer."""

    quantity: str
    formula: str
    value: str


@dataclass(frozen=True)
class Explanation:
    """The worked answer's lines and its numbers in SI units."""

    lines: tuple[ExplainLine, ...]
    values: dict[str, float | int | str | bool] = field(hash=False)


def explain(
    deployment: Deployment,
    *,
    batch_size: int,
    context_tokens: int,
    chunk_tokens: int | None = None,
    prompt_tokens: int | None = None,
    measured_step_seconds: float | None = None,
    calibration: Calibration | None = None,
    max_num_batched_tokens: int | None = None,
    speculation: Speculation | None = None,
) -> Explanation:
    """Decompose one decode step (and optionally a chunked step, a prompt's prefill, an MBU,
    and the step a calibrated server takes). `max_num_batched_tokens` sets the chunk as vLLM's
    scheduler does: the running decodes are scheduled first from the token budget
    (vllm/v1/core/sched/scheduler.py, `token_budget`), the chunk gets what they leave."""
    if max_num_batched_tokens is not None:
        chunk_tokens = chunk_from_budget(max_num_batched_tokens, batch_size)
    dep = deployment
    step = decode_step(dep, batch_size=batch_size, context_tokens=context_tokens)
    sections = [
        _decode_section(dep, step, batch_size=batch_size, context_tokens=context_tokens),
        _step_overheads_section(step),
    ]
    if calibration is not None:
        sections.append(_calibrated_section(dep, calibration, batch_size, context_tokens))
    if measured_step_seconds is not None:
        sections.append(_mbu_section(step, measured_step_seconds=measured_step_seconds))
    sections.append(_ridge_section(dep))
    if speculation is not None:
        sections.append(_speculative_section(dep, speculation, batch_size, context_tokens))
    if max_num_batched_tokens is not None:
        sections.append(_budget_section(max_num_batched_tokens, batch_size, chunk_tokens))
    if chunk_tokens:
        sections.append(
            _mixed_section(
                dep,
                step,
                batch_size=batch_size,
                context_tokens=context_tokens,
                chunk_tokens=chunk_tokens,
            )
        )
    if prompt_tokens:
        sections.append(
            _prefill_section(
                dep,
                batch_size=batch_size,
                context_tokens=context_tokens,
                prompt_tokens=prompt_tokens,
                chunk_tokens=chunk_tokens or prompt_tokens,
            )
        )
    sections.append(
        _engine_section(
            dep, batch_size=batch_size, context_tokens=context_tokens, chunk_tokens=chunk_tokens
        )
    )
    sections.append(_memory_section(dep, batch_size=batch_size, context_tokens=context_tokens))
    lines: list[ExplainLine] = []
    values: dict = {}
    for section_lines, section_values in sections:
        lines += section_lines
        values.update(section_values)
    return Explanation(tuple(lines), values)


# One part of the answer: its lines and its SI values, in the order `explain` shows them.
_Section = tuple[list[ExplainLine], dict]


def _decode_section(
    dep: Deployment, step: StepTime, *, batch_size: int, context_tokens: int
) -> _Section:
    """Deployment, weight read, KV bytes per token, KV read and the bandwidth floor."""
    model, gpu = dep.model, dep.gpu
    per_gpu = f" per GPU (TP={dep.tp})" if dep.tp > 1 else ""
    tp_div = f" / {dep.tp}" if dep.tp > 1 else ""
    bw = format_bandwidth(gpu.hbm_bytes_per_second)
    bytes_per_weight = dep.weights.bytes_per_element
    kv_bytes_per_token = model.kv_bytes_per_token(dep.kv)
    params = float(step.weight_bytes) * dep.tp / bytes_per_weight
    lines = [
        ExplainLine(
            "deployment",
            f"{model.slug}, weights {dep.weights.name}, KV {dep.kv.name}, {gpu.name}",
            f"HBM {format_bytes(gpu.hbm_bytes)} at {bw}",
        ),
        ExplainLine(
            "weights" + per_gpu,
            f"{params:,.0f} params x {bytes_per_weight:g} B{tp_div}" + _moe_note(dep, batch_size),
            f"{format_bytes(step.weight_bytes)} -> {format_seconds(step.weight_read_seconds)}",
        ),
        ExplainLine(
            "KV bytes per token",
            _kv_formula(dep),
            f"{kv_bytes_per_token:,.0f} B",
        ),
        ExplainLine(
            "KV reads" + per_gpu,
            f"{batch_size} seqs x {context_tokens:,} tokens x {kv_bytes_per_token:,.0f} B"
            + (f" x {model.kv_fraction_per_gpu(tp=dep.tp):g}" if dep.tp > 1 else "")
            + (" (sliding-window layers capped)" if model.sliding_layers else ""),
            f"{format_bytes(step.kv_bytes)} -> {format_seconds(step.kv_read_seconds)}",
        ),
        ExplainLine(
            "bandwidth floor",
            f"({format_bytes(step.weight_bytes)} + {format_bytes(step.kv_bytes)}) / {bw}",
            format_seconds(step.floor_seconds),
        ),
    ]
    return lines, _decode_values(dep, step, batch_size=batch_size, context_tokens=context_tokens)


def _decode_values(
    dep: Deployment, step: StepTime, *, batch_size: int, context_tokens: int
) -> dict:
    """The deployment and the decode step's terms in SI units, as `--json` reports them."""
    return {
        "model": dep.model.slug,
        "gpu": dep.gpu.slug,
        "weight_precision": dep.weights.name,
        "kv_precision": dep.kv.name,
        "tp": dep.tp,
        "mfu": dep.mfu,
        "batch_size": int(batch_size),
        "context_tokens": int(context_tokens),
        "hbm_bytes_per_second": dep.gpu.hbm_bytes_per_second,
        "peak_flops_per_second": dep.peak_flops_per_second,
        "weight_bytes": float(step.weight_bytes),
        "kv_bytes_per_token": float(dep.model.kv_bytes_per_token(dep.kv)),
        "kv_bytes": float(step.kv_bytes),
        "weight_read_seconds": float(step.weight_read_seconds),
        "kv_read_seconds": float(step.kv_read_seconds),
        "floor_seconds": float(step.floor_seconds),
        "allreduce_seconds": float(step.allreduce_seconds),
        "host_overhead_seconds": float(step.host_overhead_seconds),
        "decode_step_seconds": float(step.step_seconds),
    }


def _step_overheads_section(step: StepTime) -> _Section:
    """The decode step above the floor, when all-reduce or host overhead add to it."""
    if not (step.allreduce_seconds or step.host_overhead_seconds):
        return [], {}
    line = ExplainLine(
        "decode step",
        "floor + all-reduce + host overhead",
        f"{format_seconds(step.step_seconds)} (all-reduce "
        f"{format_seconds(step.allreduce_seconds)}, host "
        f"{format_seconds(step.host_overhead_seconds)})",
    )
    return [line], {}


def _calibrated_section(
    dep: Deployment, calibration: Calibration, batch_size: int, context_tokens: int
) -> _Section:
    """The decode step with the calibration's terms (its GPU family's, where it has them): its
    step model's GPU time with the efficiency + host per step and per sequence + all-reduce
    latency per call."""
    calibration = calibration.for_model(dep.gpu.slug, dep.model)
    calibrated = calibration.apply(dep)
    c = step_coefficients(calibrated, efficiency=calibration.efficiency)
    seconds = float(c.seconds(batch_size, batch_size * context_tokens, sequences=batch_size))
    gpu = (
        f"engine step (memory / {calibration.efficiency:.3g}, GEMMs at MFU {calibration.mfu:.3g})"
        if calibrated.is_engine
        else f"roofline / {calibration.efficiency:.3g}"
    )
    line = ExplainLine(
        "calibrated decode step",
        f"{gpu} + host {format_seconds(c.host_seconds(batch_size))} ({calibration.describe()})",
        format_seconds(seconds),
    )
    lines, values = [line], {"calibrated_step_seconds": seconds, "calibration": calibration.name}
    if calibrated.tp > 1 and calibrated.allreduce:
        lines.append(_calibrated_link_line(calibrated, calibration, c, batch_size))
        values["link"] = calibrated.link_kind
        values["link_bytes_per_second"] = float(calibrated.link_bytes_per_second)
    return lines, values


LINK_NAMES = {"nvlink": "NVLink", "pcie": "PCIe", "network": "the network between nodes"}


def _calibrated_link_line(dep: Deployment, calibration: Calibration, c, batch: int):
    """The calibrated step's all-reduce: its calls' latency and its bytes over the link, and
    where the link's bandwidth comes from (datasheet, a fitted share of it, a fitted network)."""
    kind = dep.link_kind
    if kind == "pcie":
        sheet = dep.gpu.pcie_bytes_per_second
        share = calibration.pcie_bandwidth_share
        source = (f"{share:.3g} of the datasheet's {format_bandwidth(sheet)}, fitted"
                  if share < 1 else "the datasheet's, one way")  # fmt: skip
    elif kind == "network":
        fitted = "network_bytes_per_second" not in calibration.undetermined
        source = "fitted" if calibration.is_calibrated and fitted else "100 Gb/s, assumed"
    else:
        source = "the datasheet's, one way"
    bytes_ = float(c.allreduce_bytes(batch))
    return ExplainLine(
        "calibrated all-reduce",
        f"{ALLREDUCES_PER_LAYER * dep.model.num_layers} calls x "
        f"{format_seconds(dep.allreduce_latency_seconds)} + {format_bytes(bytes_)} over "
        f"{LINK_NAMES[kind]} at {format_bandwidth(dep.link_bytes_per_second)} ({source})",
        format_seconds(float(c.allreduce_seconds(batch))),
    )


def _mbu_section(step: StepTime, *, measured_step_seconds: float) -> _Section:
    """Memory-bandwidth utilisation of a measured step: the floor over the measurement."""
    utilisation = mbu(floor_seconds=step.floor_seconds, measured_seconds=measured_step_seconds)
    line = ExplainLine(
        "MBU of the measured step",
        f"{format_seconds(step.floor_seconds)} / {format_seconds(measured_step_seconds)}",
        format_percent(utilisation),
    )
    values = {"measured_step_seconds": float(measured_step_seconds), "mbu": float(utilisation)}
    return [line], values


def _ridge_section(dep: Deployment) -> _Section:
    """The ridge point in FLOP/B and the tokens per step at which the GEMMs cross it."""
    ridge = dep.ridge_flops_per_byte
    bw = format_bandwidth(dep.gpu.hbm_bytes_per_second)
    line = ExplainLine(
        f"ridge ({dep.compute_precision} dense)",
        f"{format_rate(dep.peak_flops_per_second)} / {bw}",
        f"{ridge:.0f} FLOP/B; GEMMs cross it at {ridge_tokens_per_step(dep):.0f} tokens/step",
    )
    values = {
        "ridge_flops_per_byte": ridge,
        "ridge_tokens_per_step": ridge_tokens_per_step(dep),
        "compute_bound_tokens_per_step": compute_bound_tokens_per_step(dep),
    }
    lines = [line]
    share = achievable_matmul_share(dep.gpu)
    if share is not None:
        mamf = MAMF_BF16_FLOPS_PER_SECOND[dep.gpu.slug]
        peak = format_rate(dep.gpu.peak_flops_per_second["bf16"])
        lines.append(ExplainLine(
            "achievable matmul (bf16)",
            f"measured best of any shape: {format_rate(mamf)} (MAMF, stas00/ml-engineering)",
            f"{format_percent(share)} of the datasheet's {peak}",
        ))  # fmt: skip
        values["achievable_matmul_share"] = share
    return lines, values


def _speculative_section(dep: Deployment, spec: Speculation, batch: int, context: int) -> _Section:
    """The verification step of k drafts per sequence, its draft, what a token then costs, and
    the batch where speculation stops paying (`physics.speculative`)."""
    s = speculative_step(dep, batch_size=batch, context_tokens=context, spec=spec)
    cross = crossover_batch(dep, context_tokens=context, spec=spec)
    tokens = batch * (spec.k + 1)
    rates = ", ".join(f"{p:.2f}" for p in spec.per_position)
    bound = "compute-bound" if bool(s.verify_compute_bound) else "memory-bound"
    lines = [
        ExplainLine("speculation", f"{spec.method}, k = {spec.k}, acceptance per position "
                    f"{rates}: 1 + their sum", f"{s.tokens_per_step:.2f} tokens per step"),
        ExplainLine("verification step", f"{batch} x ({spec.k} + 1) = {tokens:,} tokens through "
                    "the GEMMs, weights and KV read once", f"{format_seconds(s.verify_seconds)} "
                    f"({bound})"),
        ExplainLine("draft", f"{spec.k} passes of {spec.draft_params / 1e9:g} B params"
                    if spec.draft_params else f"{spec.method}: no model pass (a lookup)",
                    format_seconds(s.draft_seconds)),
        ExplainLine("per-token latency", "(verification + draft) / tokens per step",
                    f"{format_seconds(s.per_token_seconds)} vs "
                    f"{format_seconds(s.plain_step_seconds)} without: {s.speedup:.2f}x"),
        ExplainLine("speculation stops paying", "the smallest batch whose per-token latency "
                    "reaches the plain step's", "beyond batch 4,096" if cross is None
                    else f"at batch {cross:,} (this context)"),
    ]  # fmt: skip
    values = {
        "spec_tokens_per_step": s.tokens_per_step,
        "spec_verify_seconds": float(s.verify_seconds),
        "spec_draft_seconds": float(s.draft_seconds),
        "spec_per_token_seconds": float(s.per_token_seconds),
        "spec_speedup": float(s.speedup),
        "spec_crossover_batch": cross,
    }
    return lines, values


def _prefill_section(
    dep: Deployment, *, batch_size: int, context_tokens: int, prompt_tokens: int, chunk_tokens: int
) -> _Section:
    """The prompt's prefill as chunked steps beside the decodes: its share of TTFT."""
    cost = prefill_cost(
        dep,
        prompt_tokens=prompt_tokens,
        chunk_tokens=chunk_tokens,
        batch_size=batch_size,
        context_tokens=context_tokens,
    )
    line = ExplainLine(
        "prefill of the prompt",
        f"ceil({prompt_tokens:,} / {chunk_tokens:,}) chunked steps beside the decodes",
        f"{cost.steps} steps, {format_seconds(cost.seconds)} of TTFT from prefill alone",
    )
    values = {
        "prompt_tokens": int(prompt_tokens),
        "prefill_steps": cost.steps,
        "prefill_seconds": cost.seconds,
    }
    return [line], values


# Where vLLM's step differs from the reference analysis' simplifications (the lines name them):
LOGITS_SOURCE = (
    "vLLM computes logits only at logits_indices, one per scheduled request "
    "(vllm/v1/worker/gpu_model_runner.py @000fc94b)"
)
EMBEDDING_SOURCE = (
    "the input embedding is F.embedding, a row gather "
    "(vllm/model_executor/layers/vocab_parallel_embedding.py @7f5d141a)"
)


def _unquantized_words(engine: Deployment) -> str:
    """What a quantized checkpoint streams at 16 bits in the engine model, in words ("" for
    16-bit weights)."""
    if engine.weights.bytes_per_element >= engine.activation_bytes_per_element:
        return ""
    if engine.model.quantizes_experts_only:
        return "; only the routed experts quantized (MXFP4), the rest read at 16 bits"
    return "; the LM head read at 16 bits (vLLM quantizes linear layers and experts)"


def _engine_section(
    dep: Deployment, *, batch_size: int, context_tokens: int, chunk_tokens: int | None
) -> _Section:
    """The same steps priced as vLLM computes them (`Deployment.as_engine`), beside the
    reference numbers above, which keep the worked example's simplifications: `EMBEDDING_SOURCE`
    and `LOGITS_SOURCE` say where in vLLM's source."""
    engine = dep if dep.is_engine else dep.as_engine()
    c = step_coefficients(engine)
    decode = decode_step(engine, batch_size=batch_size, context_tokens=context_tokens)
    head = c.head_flops_per_sequence * batch_size
    lines = [
        ExplainLine(
            "engine terms",
            "embedding gathered (F.embedding), logits at sampled rows only (logits_indices), "
            f"GEMMs at MFU {engine.mfu:g} x n / (n + {engine.mfu_half_tokens:g}), prefill "
            "attention" + _unquantized_words(engine),
            f"LM head {format_flops(head)} for {batch_size} sampled rows",
        ),
        ExplainLine(
            "engine decode step",
            f"max(weights {format_seconds(decode.weight_read_seconds)}, GEMMs "
            f"{format_seconds(decode.matmul_seconds)}) + KV + all-reduce + host",
            format_seconds(decode.step_seconds),
        ),
    ]
    values = {
        "engine_mfu": engine.mfu,
        "engine_mfu_half_tokens": engine.mfu_half_tokens,
        "engine_decode_step_seconds": float(decode.step_seconds),
    }
    if chunk_tokens:
        mixed = mixed_step(engine, batch_size=batch_size, context_tokens=context_tokens,
                           chunk_tokens=chunk_tokens)  # fmt: skip
        tokens = batch_size + chunk_tokens
        lines.append(
            ExplainLine(
                "engine mixed step",
                f"GEMMs over {tokens:,} tokens at "
                f"{format_percent(engine.mfu * c.gemm_efficiency(tokens))} of peak "
                f"{format_seconds(mixed.matmul_seconds)} + prefill attention "
                f"{format_seconds(mixed.prefill_attention_seconds)} + KV + all-reduce + host",
                format_seconds(mixed.step_seconds),
            )
        )
        values["engine_mixed_step_seconds"] = float(mixed.step_seconds)
        fused = _fused_moe_line(engine, c, tokens)
        if fused is not None:
            lines.append(fused[0])
            values.update(fused[1])
    return lines, values


def _fused_moe_line(engine: Deployment, c, tokens: int) -> tuple[ExplainLine, dict] | None:
    """The mixed step's MoE layers at the rate vLLM's fused-MoE kernel is measured at
    (`moe_kernel`, data/moe-kernels), beside the engine model's expert GEMMs; None where the
    published tables do not time the kernel the experts run on."""
    m, gpu = engine.model, engine.gpu
    if not m.is_moe or not measured_kernel_applies(gpu, weight_precision=engine.weights.name):
        return None
    shape = MoeKernelShape.from_model(m, tp=engine.tp)
    layer = fused_moe_seconds(
        shape, tokens=tokens, bytes_per_param=engine.weights.bytes_per_element,
        hbm_bytes_per_second=gpu.hbm_bytes_per_second,
        bf16_peak_flops_per_second=gpu.peak_flops_per_second["bf16"],
        share_of_bf16_peak=FUSED_MOE_SHARE_OF_BF16_PEAK,
        bandwidth_share=FUSED_MOE_BANDWIDTH_SHARE,
    )  # fmt: skip
    measured = float(layer) * m.moe_layers
    modelled = float(c.padded_expert_flops(tokens) / c.flops_per_second)
    line = ExplainLine(
        "fused-MoE layers, fitted rate",
        f"{m.moe_layers} layers x (touched experts' weights at "
        f"{format_percent(FUSED_MOE_BANDWIDTH_SHARE)} of HBM + their tiles' FLOPs at "
        f"{format_percent(FUSED_MOE_SHARE_OF_BF16_PEAK)} of the BF16 peak, whatever the "
        "weights' precision), fitted to vLLM's published fused-MoE kernel times "
        "(data/moe-kernels; a table held out of the fit: median 13 % off)",
        f"{format_seconds(measured)}, against the engine model's expert GEMMs "
        f"{format_seconds(modelled)} (not in the steps above)",
    )
    return line, {"fused_moe_measured_rate_seconds": measured,
                  "engine_expert_gemm_seconds": modelled}  # fmt: skip


def _memory_section(dep: Deployment, *, batch_size: int, context_tokens: int) -> _Section:
    """Whether the batch's KV fits in what the weights leave of HBM."""
    cap = capacity(dep, context_tokens=context_tokens)
    line = ExplainLine(
        "memory",
        f"{format_bytes(dep.gpu.hbm_bytes)} x {dep.gpu_memory_utilization:g} - weights, "
        f"then / {format_bytes(cap.kv_bytes_per_sequence)} per sequence",
        cap.explain(batch_size=int(batch_size)),
    )
    engine = vllm_kv_cache(dep)
    sequences = engine.kv_tokens // int(context_tokens)
    engine_line = ExplainLine(
        "memory as vLLM sizes it",
        f"{format_bytes(engine.total_bytes)} CUDA total x {engine.utilization:g} - weights - "
        f"{format_bytes(engine.overhead_bytes)} profiled activations",
        f"{engine.kv_tokens:,} KV tokens in blocks of {engine.block_tokens}: room for "
        f"{sequences:,} sequences of {int(context_tokens):,} tokens (total: "
        f"{engine.total_source})",
    )
    values = {
        "fits_in_memory": cap.fits(batch_size=int(batch_size)),
        "max_sequences": cap.max_sequences,
        "kv_budget_bytes": cap.kv_budget_bytes,
        "vllm_kv_tokens": engine.kv_tokens,
        "cuda_total_bytes": engine.total_bytes,
    }
    return [line, engine_line], values


def _moe_note(dep: Deployment, batch_size: int) -> str:
    """For MoE models: how many experts a decode batch is expected to touch (uniform routing)."""
    m = dep.model
    if not m.is_moe:
        return ""
    touched = float(m.expected_experts_touched(tokens=batch_size))
    return (
        f" (of {m.total_params:,.0f}: {touched:.1f} of {m.num_experts} experts per layer "
        f"expected at {batch_size} tokens, top-{m.experts_per_token})"
    )


def _kv_formula(dep: Deployment) -> str:
    m = dep.model
    b = f"{dep.kv.bytes_per_element:g} B"
    if m.is_mla:
        return (
            f"{m.num_layers} layers x ({m.kv_lora_rank} latent + {m.qk_rope_head_dim} rope) x {b}"
        )
    return f"2 x {m.num_layers} layers x {m.num_kv_heads} KV heads x {m.attention_head_dim} x {b}"


def chunk_from_budget(max_num_batched_tokens: int, batch_size: int) -> int:
    """The prompt tokens a step can carry beside `batch_size` decodes under vLLM's budget."""
    chunk = int(max_num_batched_tokens) - int(batch_size)
    if chunk <= 0:
        raise ValueError(
            f"max_num_batched_tokens {max_num_batched_tokens:,} leaves no room for a chunk beside "
            f"{batch_size:,} decodes (vLLM schedules the decodes first): give a budget above "
            "the batch"
        )
    return chunk


def _budget_section(budget: int, batch_size: int, chunk_tokens: int) -> _Section:
    """How the token budget becomes the chunk: the decodes are scheduled first."""
    line = ExplainLine(
        "chunk from the budget",
        f"max_num_batched_tokens {budget:,} - {batch_size:,} decodes (scheduled first)",
        f"{chunk_tokens:,} prompt tokens per step",
    )
    return [line], {"max_num_batched_tokens": int(budget), "chunk_tokens": int(chunk_tokens)}


def _mixed_section(
    dep: Deployment, step: StepTime, *, batch_size: int, context_tokens: int, chunk_tokens: int
) -> _Section:
    """A step carrying a prefill chunk beside the decodes: its GEMMs, their time, the step."""
    mixed = mixed_step(
        dep, batch_size=batch_size, context_tokens=context_tokens, chunk_tokens=chunk_tokens
    )
    tokens = int(chunk_tokens) + int(batch_size)
    rate = dep.mfu * dep.peak_flops_per_second
    bound = "compute-bound" if mixed.compute_bound else "still memory-bound"
    lines = [
        ExplainLine(
            "mixed step GEMMs",
            f"2 x {dep.matmul_params:.3g} x {tokens:,} tokens"
            + (f" / {dep.tp}" if dep.tp > 1 else ""),
            f"{format_flops(mixed.matmul_flops)} ({bound})",
        ),
        ExplainLine(
            "GEMM time",
            f"at {dep.mfu:g} of {format_rate(dep.peak_flops_per_second)} = {format_rate(rate)}",
            format_seconds(mixed.matmul_seconds),
        ),
        *_moe_elementwise_lines(dep, mixed, tokens),
        ExplainLine(
            "step with a chunk",
            "max(GEMMs, weight read) + decode KV read"
            + (" + MoE elementwise" if dep.model.is_moe else "")
            + (" + prefill attention" if dep.prefill_attention else "")
            + (" + all-reduce" if mixed.allreduce_seconds else "")
            + (" + host" if dep.host_overhead_seconds else ""),
            f"{format_seconds(mixed.step_seconds)} ({mixed.over_floor:.1f}x the floor)",
        ),
    ]
    values = dict(
        chunk_tokens=int(chunk_tokens),
        mixed_step_tokens=tokens,
        mixed_step_flops=float(mixed.matmul_flops),
        mixed_step_matmul_seconds=float(mixed.matmul_seconds),
        mixed_step_prefill_attention_seconds=float(mixed.prefill_attention_seconds),
        mixed_step_seconds=float(mixed.step_seconds),
        mixed_step_over_floor=float(mixed.step_seconds / step.floor_seconds),
        mixed_step_compute_bound=bool(mixed.compute_bound),
    )
    if dep.model.is_moe:
        values["mixed_step_moe_elementwise_seconds"] = float(mixed.moe_elementwise_seconds)
    return lines, values


def _moe_elementwise_lines(dep: Deployment, mixed: StepTime, tokens: int) -> list[ExplainLine]:
    """An MoE step's fused-MoE elementwise traffic (`roofline.moe_elementwise_bytes`): what
    silu_and_mul and moe_sum move after the expert GEMMs; none for a dense model."""
    m = dep.model
    if not m.is_moe:
        return []
    width = m.moe_intermediate_size / dep.tp
    moved = moe_elementwise_bytes(dep) * tokens
    return [ExplainLine(
        "MoE elementwise",
        f"({m.experts_per_token} x ({m.hidden_size:,} + 3 x {width:,.0f}) + {m.hidden_size:,}) x "
        f"{dep.activation_bytes_per_element:g} B x {m.moe_layers} layers x {tokens:,} tokens "
        "(silu_and_mul, moe_sum: vLLM fused_moe.py)",
        f"{format_bytes(moved)} -> {format_seconds(mixed.moe_elementwise_seconds)}",
    )]  # fmt: skip
