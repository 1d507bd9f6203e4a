"""The decomposition as a worked answer: each line a quantity, its formula and its value.

`itlkit explain` prints these lines; notebooks show them as a table. Values are SI in
`Explanation.values` (the CLI's `--json`), friendly units only in the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from itlkit.physics.roofline import (
    Deployment,
    capacity,
    compute_bound_tokens_per_step,
    decode_step,
    mbu,
    mixed_step,
    prefill_cost,
    ridge_tokens_per_step,
)
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
) -> Explanation:
    """Decompose one decode step (and optionally a chunked step, a prompt's prefill, an MBU)."""
    dep, model, gpu = deployment, deployment.model, deployment.gpu
    per_gpu = f" per GPU (TP={dep.tp})" if dep.tp > 1 else ""
    tp_div = f" / {dep.tp}" if dep.tp > 1 else ""
    step = decode_step(dep, batch_size=batch_size, context_tokens=context_tokens)
    bw = format_bandwidth(gpu.hbm_bytes_per_second)
    wbytes = dep.weights.bytes_per_element
    kv_token = model.kv_bytes_per_token(dep.kv)
    params = float(step.weight_bytes) * dep.tp / wbytes
    lines = [
        ExplainLine(
            "deployment",
            f"{model.slug}, weights {dep.weights.name}, KV {dep.kv.name}, {gpu.name}",
            f"HBM {format_bytes(gpu.hbm_bytes)} at {bw}",
        ),
        ExplainLine(
            "weights" + per_gpu,
            f"{params:,.0f} params x {wbytes:g} B{tp_div}" + _moe_note(dep, batch_size),
            f"{format_bytes(step.weight_bytes)} -> {format_seconds(step.weight_read_seconds)}",
        ),
        ExplainLine(
            "KV bytes per token",
            _kv_formula(dep),
            f"{kv_token:,.0f} B",
        ),
        ExplainLine(
            "KV reads" + per_gpu,
            f"{batch_size} seqs x {context_tokens:,} tokens x {kv_token:,.0f} B"
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
    values: dict = {
        "model": model.slug,
        "gpu": gpu.slug,
        "weight_precision": dep.weights.name,
        "kv_precision": dep.kv.name,
        "tp": dep.tp,
        "mfu": dep.mfu,
        "batch_size": int(batch_size),
        "context_tokens": int(context_tokens),
        "hbm_bytes_per_second": gpu.hbm_bytes_per_second,
        "peak_flops_per_second": dep.peak_flops_per_second,
        "weight_bytes": float(step.weight_bytes),
        "kv_bytes_per_token": float(kv_token),
        "kv_bytes": float(step.kv_bytes),
        "weight_read_seconds": float(step.weight_read_seconds),
        "kv_read_seconds": float(step.kv_read_seconds),
        "floor_seconds": float(step.floor_seconds),
        "allreduce_seconds": float(step.allreduce_seconds),
        "host_overhead_seconds": float(step.host_overhead_seconds),
        "decode_step_seconds": float(step.step_seconds),
    }
    if step.allreduce_seconds or step.host_overhead_seconds:
        lines.append(
            ExplainLine(
                "decode step",
                "floor + all-reduce + host overhead",
                f"{format_seconds(step.step_seconds)} (all-reduce "
                f"{format_seconds(step.allreduce_seconds)}, host "
                f"{format_seconds(step.host_overhead_seconds)})",
            )
        )
    if measured_step_seconds is not None:
        utilisation = mbu(floor_seconds=step.floor_seconds, measured_seconds=measured_step_seconds)
        lines.append(
            ExplainLine(
                "MBU of the measured step",
                f"{format_seconds(step.floor_seconds)} / {format_seconds(measured_step_seconds)}",
                format_percent(utilisation),
            )
        )
        values["measured_step_seconds"] = float(measured_step_seconds)
        values["mbu"] = float(utilisation)
    ridge = dep.ridge_flops_per_byte
    lines.append(
        ExplainLine(
            f"ridge ({dep.compute_precision} dense)",
            f"{format_rate(dep.peak_flops_per_second)} / {bw}",
            f"{ridge:.0f} FLOP/B; GEMMs cross it at {ridge_tokens_per_step(dep):.0f} tokens/step",
        )
    )
    values["ridge_flops_per_byte"] = ridge
    values["ridge_tokens_per_step"] = ridge_tokens_per_step(dep)
    values["compute_bound_tokens_per_step"] = compute_bound_tokens_per_step(dep)
    if chunk_tokens:
        _add_mixed(lines, values, dep, batch_size, context_tokens, chunk_tokens, step)
    if prompt_tokens:
        chunk = chunk_tokens or prompt_tokens
        cost = prefill_cost(
            dep,
            prompt_tokens=prompt_tokens,
            chunk_tokens=chunk,
            batch_size=batch_size,
            context_tokens=context_tokens,
        )
        lines.append(
            ExplainLine(
                "prefill of the prompt",
                f"ceil({prompt_tokens:,} / {chunk:,}) chunked steps beside the decodes",
                f"{cost.steps} steps, {format_seconds(cost.seconds)} of TTFT from prefill alone",
            )
        )
        values["prompt_tokens"] = int(prompt_tokens)
        values["prefill_steps"] = cost.steps
        values["prefill_seconds"] = cost.seconds
    cap = capacity(dep, context_tokens=context_tokens)
    lines.append(
        ExplainLine(
            "memory",
            f"{format_bytes(gpu.hbm_bytes)} x {dep.gpu_memory_utilization:g} - weights, "
            f"then / {format_bytes(cap.kv_bytes_per_sequence)} per sequence",
            cap.explain(batch_size=int(batch_size)),
        )
    )
    values["fits_in_memory"] = cap.fits(batch_size=int(batch_size))
    values["max_sequences"] = cap.max_sequences
    values["kv_budget_bytes"] = cap.kv_budget_bytes
    return Explanation(tuple(lines), values)


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


def _add_mixed(lines, values, dep, batch_size, context_tokens, chunk_tokens, step) -> None:
    mixed = mixed_step(
        dep, batch_size=batch_size, context_tokens=context_tokens, chunk_tokens=chunk_tokens
    )
    tokens = int(chunk_tokens) + int(batch_size)
    rate = dep.mfu * dep.peak_flops_per_second
    bound = "compute-bound" if mixed.compute_bound else "still memory-bound"
    lines += [
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
        ExplainLine(
            "step with a chunk",
            "max(GEMMs, weight read) + decode KV read"
            + (" + prefill attention" if dep.prefill_attention else "")
            + (" + all-reduce" if mixed.allreduce_seconds else "")
            + (" + host" if dep.host_overhead_seconds else ""),
            f"{format_seconds(mixed.step_seconds)} ({mixed.over_floor:.1f}x the floor)",
        ),
    ]
    values.update(
        chunk_tokens=int(chunk_tokens),
        mixed_step_tokens=tokens,
        mixed_step_flops=float(mixed.matmul_flops),
        mixed_step_matmul_seconds=float(mixed.matmul_seconds),
        mixed_step_prefill_attention_seconds=float(mixed.prefill_attention_seconds),
        mixed_step_seconds=float(mixed.step_seconds),
        mixed_step_over_floor=float(mixed.step_seconds / step.floor_seconds),
        mixed_step_compute_bound=bool(mixed.compute_bound),
    )
