"""From metrics to a ranked cause: "TTFT is fine, ITL is bad" has four usual suspects.

1. prefill_interference: steps that carry a prefill chunk are several times the floor, so the ITL
   histogram is bimodal and its slow share rises and falls with arrivals (first tokens per second).
2. batch_or_context_growth: the floor itself moved; the whole distribution shifts right and p50
   climbs with `vllm:num_requests_running`.
3. host_overhead: a unimodal histogram far above the floor (after allowing for real servers'
   50-70% bandwidth efficiency), worst at small batch: the GPU waits for the host.
4. preemption: rare multi-second gaps while `vllm:num_preemptions_total` rises.

Each cause gets a score in [0, 1] from its fingerprint, evidence as sentences with numbers, the
signals still to check, and the fixes priced by the step model. Scores are scaled down, with a
note, when the evidence is thin (few observations, one scrape, buckets too coarse), so a weak
input never produces a confident verdict. HEALTHY_BELOW is the score no cause reaches in a
healthy service.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from itlkit.diagnosis.evidence import Timeline
from itlkit.errors import EvidenceError
from itlkit.metrics.histogram import Histogram, split_modes
from itlkit.physics.roofline import Deployment, capacity, decode_step, mixed_step, prefill_cost
from itlkit.units import PRECISIONS, format_bytes, format_seconds

CAUSES = ("prefill_interference", "batch_or_context_growth", "host_overhead", "preemption")
TITLES = {
    "prefill_interference": "prefill chunks ride in decode steps",
    "batch_or_context_growth": "the batch or the context grew",
    "host_overhead": "host overhead between GPU kernels",
    "preemption": "preemption (KV cache full)",
}
HEALTHY_BELOW = 0.5
MIN_OBSERVATIONS = 500  # below this, scores shrink in proportion
TYPICAL_MBU = 0.6  # real servers reach 50-70% of HBM bandwidth in decode
PLAUSIBLE_MBU = (0.35, 1.05)
SLOW_FACTOR = 3.0  # the slow mode is looked for at ~3x the fast mode and beyond
GAP_SECONDS = 1.0  # ITL observations this long are stalls, not steps


@dataclass(frozen=True)
class Fix:
    """One remedy, what it changes (computed), and what it costs."""

    action: str
    effect: str
    price: str


@dataclass(frozen=True)
class Finding:
    """One cause with its score, evidence, what to check next, and fixes."""

    cause: str
    score: float
    evidence: tuple[str, ...]
    confirm: tuple[str, ...]
    fixes: tuple[Fix, ...]

    @property
    def title(self) -> str:
        return TITLES[self.cause]


@dataclass(frozen=True)
class Diagnosis:
    """The verdict: ranked findings plus the numbers they rest on."""

    deployment: Deployment
    timeline: Timeline
    batch_size: float
    context_tokens: float
    floor_seconds: float
    fast_mode_seconds: float
    mbu_fit: float
    mbu_range: tuple[float, float]
    expected_mixed_step_seconds: float
    max_num_batched_tokens: int
    itl_quantiles_seconds: dict[float, float]
    itl_quantile_buckets: dict[float, tuple[float, float]]
    slow_share: float
    slow_cut_seconds: float
    slow_share_by_window: np.ndarray
    floor_seconds_by_window: np.ndarray
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return all(f.score < HEALTHY_BELOW for f in self.findings)

    @property
    def top(self) -> Finding:
        return self.findings[0]

    @property
    def verdict(self) -> str:
        p50 = self.itl_quantiles_seconds[0.5]
        if self.healthy:
            return (
                f"No cause stands out (every score < {HEALTHY_BELOW}): ITL p50 "
                f"{format_seconds(p50)} is {p50 / self.floor_seconds:.1f}x the "
                f"{format_seconds(self.floor_seconds)} floor."
            )
        named = [f for f in self.findings if f.score >= HEALTHY_BELOW]
        text = f"Most likely: {named[0].title} (score {named[0].score:.2f})"
        if len(named) > 1:
            text += "; also " + ", ".join(f"{f.title} ({f.score:.2f})" for f in named[1:])
        return text + "."

    def to_json(self) -> dict:
        """SI values for `itlkit diagnose --json`."""
        q = self.itl_quantiles_seconds
        total = self.timeline.itl_total
        return {
            "model": self.deployment.model.slug,
            "gpu": self.deployment.gpu.slug,
            "tp": self.deployment.tp,
            "batch_size": self.batch_size,
            "context_tokens": self.context_tokens,
            "floor_seconds": self.floor_seconds,
            "fast_mode_seconds": self.fast_mode_seconds,
            "mbu_fit": self.mbu_fit,
            "mbu_range": list(self.mbu_range),
            "expected_mixed_step_seconds": self.expected_mixed_step_seconds,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "itl": {
                "count": total.count,
                "mean_seconds": total.mean,
                "p50_seconds": q[0.5],
                "p90_seconds": q[0.9],
                "p99_seconds": q[0.99],
                "p99_bucket_seconds": list(self.itl_quantile_buckets[0.99]),
                "slow_share": self.slow_share,
                "slow_cut_seconds": self.slow_cut_seconds,
            },
            "windows": len(self.timeline),
            "duration_seconds": self.timeline.duration_seconds,
            "healthy": self.healthy,
            "healthy_below": HEALTHY_BELOW,
            "verdict": self.verdict,
            "causes": [
                {
                    "cause": f.cause,
                    "title": f.title,
                    "score": f.score,
                    "evidence": list(f.evidence),
                    "confirm": list(f.confirm),
                    "fixes": [vars(x) for x in f.fixes],
                }
                for f in self.findings
            ],
            "notes": list(self.notes),
        }


# ---- small numeric helpers --------------------------------------------------------------------
def _ramp(x: float, low: float, high: float) -> float:
    """0 below low, 1 above high, linear between (NaN counts as 0)."""
    if not math.isfinite(x):
        return 0.0
    return float(np.clip((x - low) / (high - low), 0.0, 1.0))


def _pearson(a, b) -> float:
    """Pearson correlation over the finite pairs; NaN with fewer than 4 or no variance."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 4 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return math.nan
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _partial(a, b, control) -> float:
    """Correlation of a and b with `control` held fixed (NaN when it cannot be computed)."""
    a, b, control = (np.asarray(x, dtype=float) for x in (a, b, control))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(control)
    a, b, control = a[ok], b[ok], control[ok]
    r_ab, r_ac, r_bc = _pearson(a, b), _pearson(a, control), _pearson(b, control)
    if not all(math.isfinite(r) for r in (r_ab, r_ac, r_bc)) or max(abs(r_ac), abs(r_bc)) > 0.999:
        return math.nan
    partial = (r_ab - r_ac * r_bc) / math.sqrt((1 - r_ac**2) * (1 - r_bc**2))
    return float(np.clip(partial, -1.0, 1.0))


WINDOW_MIN_OBSERVATIONS = 50


def _window_modes(timeline: Timeline, floors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per window: share of observations in a slow mode >= ~3x that window's own fast mode,
    and the slow mode's distance from the fast mode; NaN where the buckets cannot tell.

    The fast mode is the window's p25, but never below its bandwidth floor: interpolation inside
    a coarse first bucket (vLLM's is 0-10 ms) can put p25 lower than any real step."""
    shares = np.full(len(timeline), math.nan)
    ratios = np.full(len(timeline), math.nan)
    for i, h in enumerate(timeline.itl):
        if h.count < WINDOW_MIN_OBSERVATIONS:
            continue
        fast = max(h.quantile(0.25), float(floors[i]))
        if not fast > 0:
            continue
        split = split_modes(h, floor_seconds=fast, slow_factor=SLOW_FACTOR)
        if not split.resolved:
            continue
        gaps = _gap_count(h) / h.count
        slow = max(split.slow_share - gaps, 0.0)
        if slow > 0:
            slow_mode = h.quantile(min(split.near_floor_share + slow / 2, 0.999))
            # Two modes are told apart only with a gap between their buckets; adjacent wide
            # buckets cannot distinguish a slow mode from a fast mode that moved.
            fast_upper = h.upper_bounds[np.searchsorted(h.upper_bounds, fast)]
            slow_lower = h.lower_bounds[np.searchsorted(h.upper_bounds, slow_mode)]
            if slow_lower < 2 * fast_upper:
                continue
            ratios[i] = slow_mode / fast
        shares[i] = slow
    return shares, ratios


def _mbu_fit(timeline: Timeline, floors: np.ndarray, *, fallback: float) -> float:
    """Bandwidth efficiency: each window's floor over its own fast mode (p25), the
    observation-weighted median across windows (the batch may change between windows)."""
    ratios, weights = [], []
    for h, floor in zip(timeline.itl, floors, strict=True):
        if h.count >= WINDOW_MIN_OBSERVATIONS:
            fast = max(h.quantile(0.25), floor)
            if fast > 0:
                ratios.append(floor / fast)
                weights.append(h.count)
    if not ratios:
        return fallback
    order = np.argsort(ratios)
    cumulative = np.cumsum(np.asarray(weights)[order])
    return float(np.asarray(ratios)[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


def _bucket_text(bucket: tuple[float, float]) -> str:
    low, high = bucket
    high_text = "+Inf" if math.isinf(high) else f"{high * 1e3:g}"
    return f"({low * 1e3:g}, {high_text}] ms"


def _share_above(h: Histogram, cut_index: int) -> float:
    return 1.0 - h.cumulative_counts[cut_index] / h.count if h.count > 0 else math.nan


def _gap_count(h: Histogram) -> float:
    """Observations above GAP_SECONDS (bucket-level: from the first bound >= GAP_SECONDS)."""
    at = int(np.searchsorted(h.upper_bounds, GAP_SECONDS, side="left"))
    if at >= h.upper_bounds.size - 1 and math.isinf(h.upper_bounds[at]):
        return float(h.count - h.cumulative_counts[at - 1]) if at > 0 else float(h.count)
    return float(h.count - h.cumulative_counts[at])


def default_max_num_batched_tokens(deployment: Deployment) -> int:
    """vLLM's `vllm serve` default token budget: 8192 on >= 70 GiB GPUs except A100, else 2048."""
    gpu = deployment.gpu
    if gpu.hbm_bytes >= 70 * 2**30 and "a100" not in gpu.slug:
        return 8192
    return 2048


# ---- the diagnosis ------------------------------------------------------------------------------
def diagnose(
    timeline: Timeline,
    deployment: Deployment,
    *,
    batch_size: float | None = None,
    context_tokens: float | None = None,
    max_num_batched_tokens: int | None = None,
    prompt_tokens: float | None = None,
) -> Diagnosis:
    """Score the four causes from a timeline for a deployment; batch/context from the metrics
    (running gauge; prompt and generation counters) unless given."""
    notes = list(timeline.notes)
    total = timeline.itl_total
    running = timeline.running
    if batch_size is not None:
        batch = np.full(len(timeline), float(batch_size))
    elif np.isfinite(running).any():
        batch = np.where(np.isfinite(running), running, np.nanmean(running))
    else:
        raise EvidenceError(
            "no vllm:num_requests_running gauge in the metrics: give the batch size (--batch)"
        )
    batch = np.maximum(batch, 1.0)
    mean_prompt = prompt_tokens or timeline.mean_prompt_tokens()
    if context_tokens is None:
        mean_output = timeline.mean_output_tokens()
        if not (math.isfinite(mean_prompt) and math.isfinite(mean_output)):
            raise EvidenceError(
                "the metrics do not give the mean context (vllm:prompt_tokens_total, "
                "vllm:generation_tokens_total, vllm:request_success_total): give it (--context)"
            )
        context = mean_prompt + mean_output / 2
        notes.append(
            f"mean context {context:,.0f} tokens taken from the counters (prompt "
            f"{mean_prompt:,.0f} + half of {mean_output:,.0f} generated)"
        )
    else:
        context = float(context_tokens)
    if not math.isfinite(mean_prompt):
        mean_prompt = context
    budget = max_num_batched_tokens or default_max_num_batched_tokens(deployment)

    weights = timeline.itl_counts
    floors = np.asarray(
        decode_step(deployment, batch_size=batch, context_tokens=context).floor_seconds
    )
    floor = float(np.average(floors, weights=weights) if weights.sum() > 0 else floors.mean())
    mean_batch = float(np.average(batch, weights=weights) if weights.sum() > 0 else batch.mean())
    cap = capacity(deployment, context_tokens=context)
    if not cap.weights_fit:
        notes.append(
            "the deployment as given does not fit in GPU memory "
            f"({cap.explain(batch_size=math.ceil(mean_batch))}); "
            "check the model, precision, TP and GPU"
        )

    q_estimates = {q: total.locate(q) for q in (0.25, 0.5, 0.9, 0.99)}
    fast = q_estimates[0.25]
    fast_mode = max(fast.value, floor)  # no step beats the floor; p25 in a coarse bucket can
    mbu_fit = _mbu_fit(timeline, floors, fallback=floor / fast_mode if fast_mode > 0 else math.nan)
    mbu_range = (
        floor / fast.bucket_upper if math.isfinite(fast.bucket_upper) else 0.0,
        min(floor / fast.bucket_lower, 1.0) if fast.bucket_lower > 0 else 1.0,
    )
    if fast.bucket_upper < floor:
        notes.append(
            f"a quarter of the ITL observations (p25 in bucket "
            f"{_bucket_text((fast.bucket_lower, fast.bucket_upper))}) are faster than the "
            f"{_ms(floor)} bandwidth floor, which no real step can be: the deployment given "
            "(model, precision, TP, GPU, batch) is probably not the one measured"
        )
    mixed = mixed_step(
        deployment,
        batch_size=mean_batch,
        context_tokens=context,
        chunk_tokens=max(budget - mean_batch, 0),
    )
    expected_mixed = float(mixed.step_seconds)

    split = split_modes(total, floor_seconds=fast_mode, slow_factor=SLOW_FACTOR)
    slow_share = split.slow_share if split.resolved else math.nan
    if not split.resolved:
        notes.append(f"buckets too coarse: {split.warning}")
    shares, ratios = _window_modes(timeline, floors)
    thin = min(1.0, total.count / MIN_OBSERVATIONS)
    if thin < 1:
        notes.append(
            f"only {total.count:,.0f} ITL observations (< {MIN_OBSERVATIONS}): every score is "
            f"scaled by {thin:.2f}"
        )
    ctx = _Context(
        deployment=deployment,
        timeline=timeline,
        total=total,
        floors=floors,
        floor=floor,
        batch=batch,
        mean_batch=mean_batch,
        context=context,
        mean_prompt=float(mean_prompt),
        budget=int(budget),
        fast_mode=fast_mode,
        mbu_fit=mbu_fit,
        expected_mixed=expected_mixed,
        slow_share=slow_share,
        cut=split.cut_seconds,
        split_warning=split.warning,
        by_window=shares,
        ratio_by_window=ratios,
        q=q_estimates,
    )
    findings = [
        _interference(ctx),
        _growth(ctx),
        _host_overhead(ctx),
        _preemption(ctx),
    ]
    findings = [
        dataclasses.replace(f, score=round(float(np.clip(f.score, 0.0, 1.0)) * thin, 3))
        for f in findings
    ]
    findings.sort(key=lambda f: -f.score)
    return Diagnosis(
        deployment=deployment,
        timeline=timeline,
        batch_size=mean_batch,
        context_tokens=context,
        floor_seconds=floor,
        fast_mode_seconds=fast_mode,
        mbu_fit=mbu_fit,
        mbu_range=mbu_range,
        expected_mixed_step_seconds=expected_mixed,
        max_num_batched_tokens=int(budget),
        itl_quantiles_seconds={q: e.value for q, e in q_estimates.items()},
        itl_quantile_buckets={q: (e.bucket_lower, e.bucket_upper) for q, e in q_estimates.items()},
        slow_share=slow_share,
        slow_cut_seconds=split.cut_seconds,
        slow_share_by_window=shares,
        floor_seconds_by_window=floors,
        findings=tuple(findings),
        notes=tuple(dict.fromkeys(notes)),
    )


@dataclass(frozen=True)
class _Context:
    deployment: Deployment
    timeline: Timeline
    total: Histogram
    floors: np.ndarray
    floor: float
    batch: np.ndarray
    mean_batch: float
    context: float
    mean_prompt: float
    budget: int
    fast_mode: float
    mbu_fit: float
    expected_mixed: float
    slow_share: float
    cut: float
    split_warning: str | None
    by_window: np.ndarray
    ratio_by_window: np.ndarray
    q: dict


def _interference(c: _Context) -> Finding:
    evidence, score = [], 0.0
    dep, t = c.deployment, c.timeline
    weights = t.itl_counts
    ok = np.isfinite(c.by_window)
    ratio = math.nan
    if ok.any():
        slow_only = float(np.average(c.by_window[ok], weights=weights[ok]))
        has_slow = ok & np.isfinite(c.ratio_by_window)
        ratio = float(np.median(c.ratio_by_window[has_slow])) if has_slow.any() else math.nan
        shape = (
            _ramp(slow_only, 0.01, 0.05)
            * _ramp(ratio, 2.0, 3.0)
            * (1 - _ramp(slow_only, 0.7, 0.95))
        )
        evidence.append(
            f"{100 * slow_only:.1f}% of ITL observations sit in a slow mode "
            + (f"{ratio:.1f}x" if math.isfinite(ratio) else "far")
            + f" above each window's fast mode (overall fast mode ~{_ms(c.fast_mode)}, "
            f"p99 {_ms(c.q[0.99].value)})"
        )
        evidence.append(
            f"a step carrying a {c.budget - c.mean_batch:,.0f}-token chunk beside "
            f"{c.mean_batch:.0f} decodes should take ~{_ms(c.expected_mixed)} "
            f"(max_num_batched_tokens {c.budget:,}, MFU {dep.mfu:g})"
        )
        arrivals = t.first_tokens_per_second
        r = _pearson(c.by_window, arrivals)
        r_fixed = _partial(c.by_window, arrivals, t.running)
        running_varies = np.nanstd(t.running) > 0.1 * max(np.nanmean(t.running), 1)
        # A ramp in arrivals also grows the batch; the partial correlation holds running fixed.
        # Either one showing the link counts: the shape test above already rejects a tail that is
        # only the fast mode moving (growth).
        used = max(r, r_fixed) if (running_varies and math.isfinite(r_fixed)) else r
        if math.isfinite(r):
            text = (
                f"slow-mode share per window vs first tokens per second (arrivals): r = {r:+.2f} "
                f"over {ok.sum()} windows"
            )
            if running_varies and math.isfinite(r_fixed):
                text += f"; {r_fixed:+.2f} with running requests held fixed"
            evidence.append(text)
            score = shape * (0.45 + 0.55 * max(used, 0.0))
        elif t.has_time_axis and np.isfinite(arrivals).any():
            evidence.append("slow-mode share and arrivals do not vary enough to correlate")
            score = shape * 0.6
        else:
            evidence.append("arrival correlation not available (no time axis or no TTFT count)")
            score = shape * 0.6
    else:
        evidence.append(
            "no window has enough observations and buckets fine enough to tell a slow mode "
            "from a fast mode that moved" + (f" ({c.split_warning})" if c.split_warning else "")
        )
    small = c.deployment
    small_budget = 512
    slow_small = mixed_step(
        small, batch_size=c.mean_batch, context_tokens=c.context, chunk_tokens=small_budget
    ).step_seconds
    prompt = max(round(c.mean_prompt), 1)
    steps_now = prefill_cost(
        small, prompt_tokens=prompt, chunk_tokens=max(c.budget - int(c.mean_batch), 1)
    ).steps
    steps_small = prefill_cost(small, prompt_tokens=prompt, chunk_tokens=small_budget).steps
    kv_transfer = prompt * dep.model.kv_bytes_per_token(dep.kv)
    shrink = f"the slow step shrinks from ~{_ms(c.expected_mixed)} to ~{_ms(slow_small)}"
    observed_slow = ratio * c.fast_mode
    if math.isfinite(observed_slow) and c.expected_mixed > 0:
        # The step model sets the proportion; the observed slow mode sets the scale.
        scale = observed_slow / c.expected_mixed
        shrink += (
            f" by the step model; scaled to the observed slow mode (~{_ms(observed_slow)}), "
            f"to ~{_ms(float(slow_small) * scale)}"
        )
    fixes = (
        Fix(
            f"lower max_num_batched_tokens from {c.budget:,} to "
            f"{small_budget + int(c.mean_batch):,}",
            shrink,
            f"TTFT rises: a {prompt:,}-token prompt needs {steps_small} chunked steps instead of "
            f"{steps_now}; check TTFT p99 against its SLO",
        ),
        Fix(
            "disaggregate prefill from decode",
            f"decode steps never carry a chunk: ITL stays near the ~{_ms(c.fast_mode)} fast mode",
            f"separate prefill GPUs, and each prompt's KV ({format_bytes(kv_transfer)}) crosses "
            "the network before its first token",
        ),
        Fix(
            "keep the budget, and make the stalls a tracked number: an ITL p99 objective "
            "with an alert",
            "the stalls become a measured trade for faster first tokens",
            "ITL p99 stays near the slow mode",
        ),
    )
    confirm = (
        "plot rate(vllm:time_to_first_token_seconds_count) beside the slow buckets' rate: "
        "the spikes should line up",
        "vllm:iteration_tokens_total: steps with thousands of tokens appear when prompts arrive",
    )
    return Finding("prefill_interference", float(score), tuple(evidence), confirm, fixes)


def _window_quantiles(t: Timeline, q: float, floors=None) -> np.ndarray:
    values = np.array([h.quantile(q) if h.count >= 20 else math.nan for h in t.itl])
    return values if floors is None else np.maximum(values, floors)


def _thirds_ratio(values: np.ndarray) -> float:
    ok = values[np.isfinite(values)]
    if ok.size < 3:
        return math.nan
    third = max(ok.size // 3, 1)
    first, last = np.median(ok[:third]), np.median(ok[-third:])
    return float(last / first) if first > 0 else math.nan


def _growth(c: _Context) -> Finding:
    t, dep = c.timeline, c.deployment
    evidence, score = [], 0.0
    p25 = _window_quantiles(t, 0.25, c.floors)
    p50 = _window_quantiles(t, 0.5)
    if t.has_time_axis and np.isfinite(p25).sum() >= 3:
        # The fast mode (p25) moves only when the floor moves; p50 also moves when more steps
        # carry chunks, which is interference, not growth.
        fast_ratio = _thirds_ratio(p25)
        p50_ratio = _thirds_ratio(p50)
        floor_ratio = _thirds_ratio(c.floors)
        r = _pearson(p25, t.running)
        evidence.append(
            f"the fast mode (window p25) moved {fast_ratio:.2f}x from the first to the last "
            f"third of the period (p50 {p50_ratio:.2f}x) while the floor predicted from the "
            f"running requests moved {floor_ratio:.2f}x"
        )
        if np.isfinite(t.running).any():
            evidence.append(
                f"running requests went from {np.nanmin(t.running):.0f} to "
                f"{np.nanmax(t.running):.0f} (mean {c.mean_batch:.0f}); fast mode vs running: "
                + (f"r = {r:+.2f}" if math.isfinite(r) else "no variation to correlate")
            )
        shift = max(_ramp(fast_ratio, 1.15, 1.6), 0.5 * _ramp(1 / fast_ratio, 1.15, 1.6))
        score = shift * (0.4 + 0.6 * max(r, 0.0)) if math.isfinite(r) else shift * 0.5
    else:
        evidence.append("growth over time cannot be judged without a time axis")
    fp8 = dataclasses.replace(dep, kv=PRECISIONS["fp8"])
    kv_now = decode_step(dep, batch_size=c.mean_batch, context_tokens=c.context)
    kv_fp8 = decode_step(fp8, batch_size=c.mean_batch, context_tokens=c.context)
    # The knee: past the batch whose KV read equals the weight read, KV dominates the floor.
    per_sequence = float(kv_now.kv_read_seconds) / c.mean_batch
    cap_seqs = max(int(float(kv_now.weight_read_seconds) / per_sequence), 1) if per_sequence else 1
    target = float(decode_step(dep, batch_size=cap_seqs, context_tokens=c.context).floor_seconds)
    fixes = (
        Fix(
            "quantize the KV cache to FP8",
            f"the KV term halves: {_ms(kv_now.kv_read_seconds)} -> {_ms(kv_fp8.kv_read_seconds)} "
            f"at {c.mean_batch:.0f} sequences of {c.context:,.0f} tokens",
            "a small accuracy risk; check quality on your evals",
        ),
        Fix(
            f"cap max_num_seqs near {cap_seqs}, where the KV read equals the weight read",
            f"the floor stays at or below ~{_ms(target)} (now ~{_ms(c.floor)} at batch "
            f"{c.mean_batch:.0f})",
            "requests beyond the cap queue instead of slowing everyone: TTFT rises under load",
        ),
        Fix("add replicas", "each replica runs a smaller batch", "more GPUs"),
    )
    confirm = (
        "plot vllm:num_requests_running and the mean context (prompt + generated tokens) "
        "over the incident",
        "ITL p50 should track the floor predicted from those two numbers",
    )
    return Finding("batch_or_context_growth", float(score), tuple(evidence), confirm, fixes)


def _host_overhead(c: _Context) -> Finding:
    ratio = 1.0 / c.mbu_fit if c.mbu_fit > 0 else math.nan
    p50 = c.q[0.5].value
    fast = c.q[0.25]
    bucket = _bucket_text((fast.bucket_lower, fast.bucket_upper))
    evidence = [
        f"the fast mode (p25 {_ms(c.fast_mode)} overall, interpolated in bucket {bucket}) sits "
        f"{ratio:.1f}x above the bandwidth floor ({_ms(c.floor)} at batch {c.mean_batch:.0f}), "
        f"window by window: an MBU of {100 * c.mbu_fit:.0f}% (real servers reach 50-70%)",
    ]
    unimodal = 1.0 - (_ramp(c.slow_share, 0.03, 0.1) if math.isfinite(c.slow_share) else 0.0)
    score = _ramp(ratio, 1.0 / PLAUSIBLE_MBU[0], 1.0 / PLAUSIBLE_MBU[0] + 1.5) * (
        0.3 + 0.7 * unimodal
    )
    overhead = p50 - c.floor / TYPICAL_MBU
    if overhead > 0:
        evidence.append(
            f"p50 {_ms(p50)} leaves ~{_ms(overhead)} per step unexplained even at "
            f"{100 * TYPICAL_MBU:.0f}% MBU"
        )
    evidence.append(
        "histogram is unimodal" if unimodal > 0.5 else "histogram has a slow mode as well"
    )
    if c.mean_batch <= 16:
        evidence.append(f"small batch ({c.mean_batch:.0f}): a fixed per-step cost weighs most here")
        score = min(1.0, score * 1.15)
    fixes = (
        Fix(
            "profile a handful of engine steps with Nsight Systems",
            "gaps between kernels on the GPU timeline show the host is the bottleneck",
            "minutes of profiling",
        ),
        Fix(
            "turn CUDA graphs on (drop --enforce-eager); keep sampling and detokenizing from "
            "blocking the next step",
            "removes launch and Python gaps: the step can fall toward "
            f"{_ms(c.floor / TYPICAL_MBU)}",
            "more GPU memory for graph capture; some sampling options disable graphs",
        ),
    )
    confirm = (
        "GPU utilisation says nothing here (near 100% either way); look at the kernel timeline",
        "if p50 barely changes with batch size, the cost is per step, not per token",
    )
    return Finding("host_overhead", float(score), tuple(evidence), confirm, fixes)


def _preemption(c: _Context) -> Finding:
    t, dep = c.timeline, c.deployment
    gaps_by_window = np.array([_gap_count(h) for h in t.itl])
    gaps = float(gaps_by_window.sum())
    preempted = float(np.nansum(t.preemptions)) if np.isfinite(t.preemptions).any() else math.nan
    evidence = [
        f"{gaps:,.0f} ITL observations above {GAP_SECONDS:g} s "
        f"({100 * gaps / c.total.count:.3f}% of {c.total.count:,.0f})"
    ]
    if math.isfinite(preempted):
        evidence.append(f"vllm:num_preemptions_total rose by {preempted:,.0f} over the period")
        score = 0.55 * (preempted > 0) + 0.3 * _ramp(gaps, 0, 5)
        r = _pearson(t.preemptions, gaps_by_window)
        if math.isfinite(r):
            evidence.append(f"preemptions vs multi-second gaps per window: r = {r:+.2f}")
            score += 0.15 * max(r, 0.0)
        elif preempted > 0 and gaps > 0:
            score += 0.1
    else:
        evidence.append("no preemption counter in the metrics: judged from the gaps alone")
        score = 0.45 * _ramp(gaps, 0, 5)
    if np.isfinite(t.kv_usage).any():
        evidence.append(f"KV cache usage peaked at {100 * np.nanmax(t.kv_usage):.0f}%")
    at_mean = capacity(dep, context_tokens=c.context)
    if at_mean.weights_fit and c.mean_batch > at_mean.max_sequences:
        evidence.append(
            f"~{c.mean_batch:.0f} running sequences of ~{c.context:,.0f} tokens need more KV than "
            f"the {format_bytes(at_mean.kv_budget_bytes)} left after weights "
            f"(room for {at_mean.max_sequences}): the cache runs full"
        )
    # A request holds its prompt and, by its end, all of its output: size the cap for that.
    longest = max(c.mean_prompt + 2 * (c.context - c.mean_prompt), c.context)
    cap = capacity(dep, context_tokens=longest)
    fp8 = dataclasses.replace(dep, kv=PRECISIONS["fp8"])
    cap_fp8 = capacity(fp8, context_tokens=longest)
    fixes = (
        Fix(
            f"cap max_num_seqs at ~{cap.max_sequences}",
            f"{cap.max_sequences} sequences of {longest:,.0f} tokens (prompt + full output) fit in "
            f"{format_bytes(cap.kv_budget_bytes)} of KV per GPU",
            "requests beyond it wait in the queue (TTFT) instead of being evicted mid-stream",
        ),
        Fix(
            "quantize the KV cache to FP8",
            f"room for {cap_fp8.max_sequences} sequences instead of {cap.max_sequences}",
            "a small accuracy risk",
        ),
        Fix(
            "raise gpu_memory_utilization, TP, or replicas",
            "more KV room",
            "more GPUs or less headroom",
        ),
    )
    confirm = (
        "rate(vllm:num_preemptions_total) should be non-zero exactly when the long gaps appear",
        "vllm:kv_cache_usage_perc near 1.0 before each preemption",
    )
    return Finding("preemption", float(min(score, 1.0)), tuple(evidence), confirm, fixes)


def postmortem_text(d: Diagnosis) -> str:
    """The diagnosis as a short postmortem a team can read."""
    t, dep = d.timeline, d.deployment
    q = d.itl_quantiles_seconds
    low, high = d.itl_quantile_buckets[0.99]
    period = (
        f"{t.snapshots} scrapes, {len(t)} windows over {t.duration_seconds / 60:.1f} min"
        if t.has_time_axis
        else "one scrape (cumulative since the server started)"
    )
    mbu_low, mbu_high = d.mbu_range
    lines = [
        f"ITL postmortem: {period}",
        f"deployment   {dep.label}, batch ~{d.batch_size:.0f}, context ~{d.context_tokens:,.0f} "
        "tokens",
        f"floor        {format_seconds(d.floor_seconds)} (weights + KV at HBM bandwidth)",
        f"fast mode    {format_seconds(d.fast_mode_seconds)}: MBU fit {100 * d.mbu_fit:.0f}% "
        f"(its bucket allows {100 * mbu_low:.0f}-{100 * mbu_high:.0f}%)",
        f"ITL          p50 {format_seconds(q[0.5])}, p90 {format_seconds(q[0.9])}, p99 "
        f"{format_seconds(q[0.99])} (interpolated in the ({format_seconds(low)}, "
        f"{'+Inf' if math.isinf(high) else format_seconds(high)}] bucket), mean "
        f"{format_seconds(t.itl_total.mean)} over {t.itl_total.count:,.0f} observations",
        "",
        f"verdict      {d.verdict}",
        "",
    ]
    for rank, finding in enumerate(d.findings, 1):
        flag = "" if finding.score >= HEALTHY_BELOW else "  (below threshold)"
        lines.append(f"{rank}. {finding.title}: score {finding.score:.2f}{flag}")
        lines += [f"   - {e}" for e in finding.evidence]
        if finding.score >= HEALTHY_BELOW:
            lines.append("   check next:")
            lines += [f"   - {c}" for c in finding.confirm]
            lines.append("   fixes and their price:")
            lines += [f"   - {f.action}: {f.effect}. Price: {f.price}." for f in finding.fixes]
        lines.append("")
    if d.notes:
        lines.append("notes")
        lines += [f"- {n}" for n in d.notes]
    return "\n".join(lines).rstrip()
