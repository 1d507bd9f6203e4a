"""The numbers a diagnosis rests on, measured once from a Timeline: no scores, no sentences.

A `Fingerprint` holds the bandwidth floor the running batch implies, the fast mode (the window
p25, never below its floor), the slow mode beside it, the growth of the fast mode over the
period, the multi-second gaps, and the correlations between them and the signals that explain
them (arrivals, running requests, preemptions). `scoring` turns the named features into scores
through one table; `findings` turns them into sentences.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from itlkit.diagnosis.evidence import Timeline
from itlkit.errors import EvidenceError
from itlkit.metrics.histogram import Histogram, split_modes
from itlkit.metrics.vllm_metrics import family
from itlkit.physics.roofline import Deployment, decode_step, mixed_step, step_seconds
from itlkit.physics.speculative import speculative_step

# The counters that give a run's mean context, where the engine exports them.
CONTEXT_COUNTERS = ("prompt_tokens", "generation_tokens", "request_success")


def _families(keys, engine: str) -> list[str]:
    """The engine's names for these metrics (those it exports)."""
    return [name for key in keys if (name := family(key, engine)).startswith(f"{engine}:")]


SLOW_FACTOR = 3.0  # the slow mode is looked for at ~3x the fast mode and beyond
# Two clusters are separate where the bucket density (observations per second of bucket width)
# dips below this share of the smaller neighbouring peak: er0080's opt-125m page has 266 obs/ms
# at 25-50 ms behind 138 obs/ms at 10-25 ms (0.52), a second mode by its author's reading; a
# Poisson tail falls monotonically and never dips. An empty bucket always separates.
VALLEY_RATIO = 0.7
MIN_PEAK_OBSERVATIONS = 5  # a dip next to fewer observations than this is counting noise
# The worst bandwidth efficiency a working server shows in decode (real servers reach 35-105%
# of the roofline's bandwidth): the slowest GPU time a step can plausibly take is floor / this.
PLAUSIBLE_MBU_LOW = 0.35
GAP_SECONDS = 1.0  # ITL observations this long are stalls, not steps
WINDOW_MIN_OBSERVATIONS = 50  # a window with fewer has no quantiles worth reading
QUANTILES = (0.25, 0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Cluster:
    """One separated hump of the ITL histogram: its bucket range, size and estimated mean."""

    lower_seconds: float
    upper_seconds: float  # inf when it holds the +Inf bucket
    observations: float
    share: float
    mean_seconds: float  # the main cluster's from the histogram's _sum; others' bucket midpoints
    behind_empty_bucket: bool  # an empty bucket separates it from the cluster below


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """Every measured feature of an incident, in SI units; NaN where the input cannot tell."""

    batch_size: float  # observation-weighted mean of the running gauge
    context_tokens: float
    context_from_counters: bool
    mean_prompt_tokens: float
    uncached_prompt_tokens: float  # what an arriving prompt leaves to prefill after the cache
    mean_output_tokens: float
    max_num_batched_tokens: int
    floor_seconds: float
    floor_seconds_by_window: np.ndarray
    fast_mode_seconds: float
    mbu_fit: float
    mbu_range: tuple[float, float]
    itl_quantiles_seconds: dict[float, float]
    itl_quantile_buckets: dict[float, tuple[float, float]]
    expected_mixed_step_seconds: float  # a step carrying a full token budget's chunk
    slow_share: float  # whole period, bucket-level split at ~sqrt(SLOW_FACTOR) x fast mode
    slow_cut_seconds: float
    split_warning: str | None
    slow_share_by_window: np.ndarray
    slow_factor_by_window: np.ndarray
    window_slow_share: float  # observation-weighted over the windows that resolve a slow mode
    slow_mode_factor: float  # median over windows: slow mode / fast mode
    arrival_chunk_factor: float  # predicted step with an arriving prompt's chunk / decode step
    arrival_r: float  # slow share per window vs first tokens per second
    arrival_r_fixed: float  # the same with running requests held fixed
    running_varies: bool
    correlated_windows: int
    fast_mode_growth: float  # fast mode, last third of the period over the first
    p50_growth: float
    floor_growth: float
    growth_correlation: float  # window fast mode vs running requests
    gap_observations: float  # ITL observations above GAP_SECONDS
    preemptions: float  # increase of vllm:num_preemptions_total (NaN: not exported)
    gap_correlation: float  # preemptions vs gaps per window
    observations: float
    clusters: tuple[Cluster, ...] = ()
    main_cluster: int = 0  # index of the cluster holding the most observations
    step_seconds: float = math.nan  # the main cluster's mean, else the fast mode
    healthy_host_seconds: float = math.nan  # calibrated host cost of one step at this batch
    host_excess_ratio: float = math.nan  # (step - slowest plausible GPU time) / healthy host
    side_per_arrival: float = math.nan  # observations in slower clusters per first token
    engine: str = "vllm"  # whose metrics: "vllm" or "sglang" (`Timeline.engine`)
    stall_time_share: float = math.nan  # share of the ITL _sum above each window's slow cut
    prefill_load: float = math.nan  # GPU time the prompts need (step model) / wall time
    prefill_batch_seconds: float = math.nan  # a full budget of prompt tokens alone (step model)
    gaps_per_preemption: float = math.nan  # gap observations / preemptions (at least 0.5)
    prefill_alone_share: float = math.nan  # GPU time in prefill batches alone / wall time
    mixed_share: float = math.nan  # ... in batches that prefill beside decodes (measured)
    spec_tokens_per_step: float = math.nan  # speculative decoding: tokens a step emits (counters)
    spec_speedup: float = math.nan  # plain step / speculative per-token time, step model, here
    spec_verify_seconds: float = math.nan  # the verification step there (step model)

    @property
    def slowest_gpu_seconds(self) -> float:
        """The slowest GPU time a step can plausibly take: the floor (with speculation the
        verification step, whose k + 1 tokens a sequence may be compute-bound) / 0.35."""
        verify = self.spec_verify_seconds if math.isfinite(self.spec_verify_seconds) else 0.0
        return max(self.floor_seconds, verify) / PLAUSIBLE_MBU_LOW

    @property
    def prefill_gpu_share(self) -> float:
        """The measured share of wall time the GPU ran prompt tokens (alone or mixed)."""
        return self.prefill_alone_share + self.mixed_share

    @property
    def main_cluster_share(self) -> float:
        """Share of the observations in the main cluster (1 for a single hump)."""
        return self.clusters[self.main_cluster].share if self.clusters else math.nan

    @property
    def fast_over_floor(self) -> float:
        """How many times the floor the fast mode sits (1 / MBU fit)."""
        return 1.0 / self.mbu_fit if self.mbu_fit > 0 else math.nan

    @property
    def arrival_correlation(self) -> float:
        """The arrival link: either correlation counts (a ramp in arrivals also grows the batch;
        the partial one holds running fixed), the plain one when running does not vary."""
        if self.running_varies and math.isfinite(self.arrival_r_fixed):
            return max(self.arrival_r, self.arrival_r_fixed)
        return self.arrival_r


# ---- small numeric helpers --------------------------------------------------------------------
def pearson(a, b) -> float:
    """Pearson correlation over the finite pairs; NaN with fewer than 4 or no variance."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 4 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return math.nan
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def partial_correlation(a, b, control) -> float:
    """Correlation of a and b with `control` held fixed (NaN when it cannot be computed)."""
    a, b, control = (np.asarray(x, dtype=float) for x in (a, b, control))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(control)
    a, b, control = a[ok], b[ok], control[ok]
    r_ab, r_ac, r_bc = pearson(a, b), pearson(a, control), pearson(b, control)
    if not all(math.isfinite(r) for r in (r_ab, r_ac, r_bc)) or max(abs(r_ac), abs(r_bc)) > 0.999:
        return math.nan
    partial = (r_ab - r_ac * r_bc) / math.sqrt((1 - r_ac**2) * (1 - r_bc**2))
    return float(np.clip(partial, -1.0, 1.0))


def gap_count(h: Histogram) -> float:
    """Observations above GAP_SECONDS (bucket-level: from the first bound >= GAP_SECONDS)."""
    at = int(np.searchsorted(h.upper_bounds, GAP_SECONDS, side="left"))
    if at >= h.upper_bounds.size - 1 and math.isinf(h.upper_bounds[at]):
        return float(h.count - h.cumulative_counts[at - 1]) if at > 0 else float(h.count)
    return float(h.count - h.cumulative_counts[at])


def _runs_between_empty_buckets(counts: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index runs of non-empty buckets; an empty bucket ends a run."""
    runs, start = [], None
    for i, c in enumerate(counts):
        if c > 0 and start is None:
            start = i
        elif c <= 0 and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, counts.size))
    return runs


def _split_at_valleys(density: np.ndarray, counts: np.ndarray, a: int, b: int) -> list[int]:
    """Indices inside [a, b) where a new cluster starts: the lowest bucket between two density
    peaks, when it dips below VALLEY_RATIO of the smaller peak (which holds enough observations)."""
    cuts, peak, valley = [], a, None
    for i in range(a + 1, b):
        d = density[i]
        if not math.isfinite(d):
            continue  # the +Inf bucket has no width: it joins the cluster below
        if valley is None or d < density[valley]:
            if d < density[peak]:
                valley = i
            else:
                peak, valley = i, None
            continue
        if d > density[valley] and (i + 1 >= b or not density[i + 1] > d):
            # i is a peak after a valley: cut if the dip is deep and the peaks are not noise
            smaller = min(density[peak], d)
            enough = min(counts[peak], counts[i]) >= MIN_PEAK_OBSERVATIONS
            if density[valley] < VALLEY_RATIO * smaller and enough:
                cuts.append(valley + 1)  # the thin bucket stays with the cluster below, as its tail
                peak, valley = i, None
            elif d > density[peak]:
                peak, valley = i, None
    return cuts


def find_clusters(h: Histogram) -> tuple[Cluster, ...]:
    """Every separated cluster of a histogram, lowest first: runs of non-empty buckets, each
    split where the bucket density dips (see VALLEY_RATIO); means from bucket midpoints, the
    biggest cluster's from the _sum (the only place its observations' mean is written)."""
    counts = np.asarray(h.bucket_counts, dtype=float)
    if h.count <= 0:
        return ()
    lower, upper = h.lower_bounds, h.upper_bounds
    with np.errstate(divide="ignore", invalid="ignore"):
        density = np.where(np.isfinite(upper), counts / (upper - lower), np.nan)
    spans = []
    for a, b in _runs_between_empty_buckets(counts):
        edges = [a, *_split_at_valleys(density, counts, a, b), b]
        spans += [(lo, hi, lo == a and bool(spans)) for lo, hi in itertools.pairwise(edges)]
    mids = np.where(np.isfinite(upper), (np.maximum(lower, 0) + upper) / 2, lower)
    raw = [
        (lo, hi, float(counts[lo:hi].sum()), float(np.dot(mids[lo:hi], counts[lo:hi])), behind)
        for lo, hi, behind in spans
    ]
    main = int(np.argmax([r[2] for r in raw]))
    clusters = []
    for k, (lo, hi, n, midsum, behind) in enumerate(raw):
        mean = midsum / n
        # The sum gives the main cluster's mean only when every other cluster's mean is
        # bounded: a slower cluster holding +Inf could hide any amount of time.
        open_ended = any(math.isinf(upper[r[1] - 1]) for j, r in enumerate(raw) if j != main)
        if k == main and math.isfinite(h.sum) and not open_ended:
            others = sum(r[3] for j, r in enumerate(raw) if j != main)
            mean = float(np.clip((h.sum - others) / n, max(lower[lo], 0.0), upper[hi - 1]))
        clusters.append(Cluster(
            lower_seconds=float(max(lower[lo], 0.0)), upper_seconds=float(upper[hi - 1]),
            observations=n, share=n / h.count, mean_seconds=float(mean),
            behind_empty_bucket=behind,
        ))  # fmt: skip
    return tuple(clusters)


def fast_mode(h: Histogram, floor_seconds: float) -> float:
    """The fast mode: p25, never below the bandwidth floor (interpolation inside a coarse first
    bucket, vLLM's is 0-10 ms, can put p25 lower than any real step); NaN for a thin window."""
    if h.count < WINDOW_MIN_OBSERVATIONS:
        return math.nan
    return max(h.quantile(0.25), float(floor_seconds))


def _thirds_ratio(values: np.ndarray) -> float:
    """Median of the last third over the median of the first third of the finite values."""
    ok = values[np.isfinite(values)]
    if ok.size < 3:
        return math.nan
    third = max(ok.size // 3, 1)
    first, last = np.median(ok[:third]), np.median(ok[-third:])
    return float(last / first) if first > 0 else math.nan


def _weighted_median(values, weights) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(np.asarray(weights, dtype=float)[order])
    return float(np.asarray(values)[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


# ---- the measurements -------------------------------------------------------------------------
def _window_mode(h: Histogram, fast: float) -> tuple[float, float]:
    """A window's slow-mode share (gaps excluded) and its distance from the fast mode: from the
    split at ~sqrt(SLOW_FACTOR) x the fast mode, else (a fast mode that straddles a bucket bound
    leaves that split inside it) from the window's separated clusters."""
    share, factor = _split_mode(h, fast)
    if math.isnan(share) or (share > 0 and math.isnan(factor)):
        return _cluster_mode(h, fast)
    return share, factor


def _cluster_mode(h: Histogram, fast: float) -> tuple[float, float]:
    """The clusters above the window's biggest (below GAP_SECONDS: stalls are not steps) as its
    slow mode: their share and their observation-weighted mean over the fast mode."""
    clusters = find_clusters(h)
    if len(clusters) < 2:
        return math.nan, math.nan
    main = int(np.argmax([c.observations for c in clusters]))
    slower = [c for c in clusters[main + 1 :] if c.lower_seconds < GAP_SECONDS]
    share = sum(c.share for c in slower)
    if share == 0:
        return 0.0, math.nan
    mean = sum(c.share * c.mean_seconds for c in slower) / share
    return float(share), float(mean / fast)


def _split_mode(h: Histogram, fast: float) -> tuple[float, float]:
    """The slow mode past the fixed-factor split (NaN where the buckets cannot tell it)."""
    split = split_modes(h, floor_seconds=fast, slow_factor=SLOW_FACTOR, reference="fast mode")
    if not split.resolved:
        return math.nan, math.nan
    slow = max(split.slow_share - gap_count(h) / h.count, 0.0)
    if slow == 0:
        return 0.0, math.nan
    slow_mode = h.quantile(min(split.near_floor_share + slow / 2, 0.999))
    # Two modes are told apart only with a gap between their buckets; adjacent wide buckets
    # cannot distinguish a slow mode from a fast mode that moved.
    fast_upper = h.upper_bounds[np.searchsorted(h.upper_bounds, fast)]
    slow_lower = h.lower_bounds[np.searchsorted(h.upper_bounds, slow_mode)]
    if slow_lower < 2 * fast_upper:
        return math.nan, math.nan
    return slow, slow_mode / fast


def _batch_and_context(timeline, batch_size, context_tokens, prompt_tokens):
    """Running sequences per window, the mean context, the mean prompt and output."""
    running = timeline.running
    if batch_size is not None:
        batch = np.full(len(timeline), float(batch_size))
    elif np.isfinite(running).any():
        batch = np.where(np.isfinite(running), running, np.nanmean(running))
    else:
        raise EvidenceError(
            f"no {family('running', timeline.engine)} value in the metrics (missing, or NaN): "
            "give the batch size (--batch)"
        )
    mean_prompt = prompt_tokens or timeline.mean_prompt_tokens()
    mean_output = timeline.mean_output_tokens()
    if context_tokens is None:
        if not (math.isfinite(mean_prompt) and math.isfinite(mean_output)):
            raise EvidenceError(
                "the metrics do not give the mean context ("
                + ", ".join(_families(CONTEXT_COUNTERS, timeline.engine))
                + "): give it (--context)"
            )
        context = mean_prompt + mean_output / 2
    else:
        context = float(context_tokens)
    mean_prompt = mean_prompt if math.isfinite(mean_prompt) else context
    return np.maximum(batch, 1.0), float(context), float(mean_prompt), float(mean_output)


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    return float(np.average(values, weights=weights) if weights.sum() > 0 else values.mean())


def _arrival_chunk_factor(deployment, *, batch, context, prompt, budget) -> float:
    """How many decode steps a step carrying one arriving prompt's chunk costs (step model)."""
    chunk = min(prompt, max(budget - batch, 0))
    args = dict(batch_size=batch, context_tokens=context)
    mixed = float(mixed_step(deployment, chunk_tokens=chunk, **args).step_seconds)
    return mixed / float(decode_step(deployment, **args).step_seconds)


def _floor_and_fast(t: Timeline, deployment, batch, context) -> tuple[dict, np.ndarray]:
    """The floor per window and overall, the fast mode, the MBU fit, the overall quantiles."""
    weights = t.itl_counts
    floors = np.asarray(
        decode_step(deployment, batch_size=batch, context_tokens=context).floor_seconds
    )
    floor = _weighted_mean(floors, weights)
    located = {q: t.itl_total.locate(q) for q in QUANTILES}
    p25 = located[0.25]
    fast = max(p25.value, floor)
    fasts = np.array([fast_mode(h, f) for h, f in zip(t.itl, floors, strict=True)])
    ok = np.isfinite(fasts) & (fasts > 0)
    # Each window's floor over its own fast mode: the batch may change between windows.
    mbu_fit = _weighted_median(floors[ok] / fasts[ok], weights[ok]) if ok.any() else floor / fast
    return dict(
        floor_seconds=floor,
        floor_seconds_by_window=floors,
        fast_mode_seconds=fast,
        mbu_fit=mbu_fit,
        mbu_range=(
            floor / p25.bucket_upper if math.isfinite(p25.bucket_upper) else 0.0,
            min(floor / p25.bucket_lower, 1.0) if p25.bucket_lower > 0 else 1.0,
        ),
        itl_quantiles_seconds={q: e.value for q, e in located.items()},
        itl_quantile_buckets={q: (e.bucket_lower, e.bucket_upper) for q, e in located.items()},
    ), fasts


def _slow_mode(t: Timeline, fasts: np.ndarray, fast: float) -> dict:
    """The slow mode per window and overall, and its correlation with arrivals."""
    weights = t.itl_counts
    modes = [
        _window_mode(h, f) if f > 0 else (math.nan, math.nan)
        for h, f in zip(t.itl, fasts, strict=True)
    ]
    shares = np.array([m[0] for m in modes], dtype=float)
    factors = np.array([m[1] for m in modes], dtype=float)
    resolved = np.isfinite(shares)
    with_factor = resolved & np.isfinite(factors)
    split = split_modes(
        t.itl_total, floor_seconds=fast, slow_factor=SLOW_FACTOR, reference="fast mode"
    )
    running, arrivals = t.running, t.first_tokens_per_second
    known = np.isfinite(running).any()
    return dict(
        slow_share=split.slow_share if split.resolved else math.nan,
        slow_cut_seconds=split.cut_seconds,
        split_warning=split.warning,
        slow_share_by_window=shares,
        slow_factor_by_window=factors,
        window_slow_share=(
            float(np.average(shares[resolved], weights=weights[resolved]))
            if resolved.any() and weights[resolved].sum() > 0
            else math.nan
        ),
        slow_mode_factor=float(np.median(factors[with_factor])) if with_factor.any() else math.nan,
        arrival_r=pearson(shares, arrivals),
        arrival_r_fixed=partial_correlation(shares, arrivals, running),
        running_varies=known and bool(np.nanstd(running) > 0.1 * max(np.nanmean(running), 1)),
        correlated_windows=int(resolved.sum()),
    )


def _growth(t: Timeline, fasts: np.ndarray, floors: np.ndarray) -> dict:
    """How far the fast mode, p50 and the predicted floor moved over the period."""
    if not (t.has_time_axis and np.isfinite(fasts).sum() >= 3):
        return dict(fast_mode_growth=math.nan, p50_growth=math.nan, floor_growth=math.nan,
                    growth_correlation=math.nan)  # fmt: skip
    p50s = np.array(
        [h.quantile(0.5) if h.count >= WINDOW_MIN_OBSERVATIONS else math.nan for h in t.itl]
    )
    return dict(
        fast_mode_growth=_thirds_ratio(fasts),
        p50_growth=_thirds_ratio(p50s),
        floor_growth=_thirds_ratio(floors),
        growth_correlation=pearson(fasts, t.running),
    )


def _gaps(t: Timeline) -> dict:
    """Multi-second stalls, the preemption counter, and their link window by window. A
    preemption gives its own request one long gap (its recompute), so gaps far beyond the
    preemptions come from elsewhere; with none counted, the ratio takes half a preemption."""
    gaps = np.array([gap_count(h) for h in t.itl])
    known = np.isfinite(t.preemptions).any()
    preemptions = float(np.nansum(t.preemptions)) if known else math.nan
    total = float(gaps.sum())
    return dict(
        gap_observations=total,
        preemptions=preemptions,
        gap_correlation=pearson(t.preemptions, gaps),
        gaps_per_preemption=total / max(preemptions, 0.5) if known and total > 0 else math.nan,
    )


def time_above(h: Histogram, cut_seconds: float) -> float:
    """Seconds of observations in buckets wholly above `cut_seconds`: each at its bucket's
    midpoint, the +Inf bucket's at its lower bound (a lower estimate)."""
    counts = np.asarray(h.bucket_counts, dtype=float)
    lower, upper = h.lower_bounds, h.upper_bounds
    above = lower >= cut_seconds
    value = np.where(np.isfinite(upper), (lower + upper) / 2, lower)
    return float(np.dot(counts[above], value[above]))


def _stalls(t: Timeline, deployment, fasts: np.ndarray, fast: float, *, budget: int,
            uncached_share: float) -> dict:  # fmt: skip
    """The streams' time spent in stalls, beside the GPU time the prompts need.

    A stall is a gap past the slow-mode cut (~sqrt(SLOW_FACTOR) x the window's fast mode),
    multi-second gaps included: where prefill runs alone (SGLang's default) every running stream
    waits out each prefill batch, so the streams' share of time in stalls approaches the GPU's
    share of time in prefill, `prefill_load`."""
    cut = math.sqrt(SLOW_FACTOR)
    stalled = sum(
        time_above(h, cut * (f if f > 0 else fast)) for h, f in zip(t.itl, fasts, strict=True)
    )
    total = sum(h.sum for h in t.itl if math.isfinite(h.sum))
    batch = float(step_seconds(deployment, decode_tokens=0, prefill_tokens=budget, kv_tokens=0))
    load = math.nan
    prompts = t.prompt_tokens
    if t.has_time_axis and np.isfinite(prompts).any() and t.duration_seconds > 0:
        load = float(np.nansum(prompts)) * uncached_share * batch / budget / t.duration_seconds
    alone = mixed = math.nan
    if t.forward_seconds is not None and t.duration_seconds > 0:
        alone = float(np.nansum(t.forward_seconds["extend"])) / t.duration_seconds
        mixed = float(np.nansum(t.forward_seconds["mixed"])) / t.duration_seconds
    return dict(
        stall_time_share=stalled / total if total > 0 else math.nan,
        prefill_load=load,
        prefill_batch_seconds=batch,
        prefill_alone_share=alone,
        mixed_share=mixed,
    )


def _cluster_fields(
    t: Timeline,
    *,
    fast: float,
    slowest_gpu: float,
    batch: float,
    host_seconds_per_step: float,
    host_seconds_per_sequence: float,
) -> dict:
    """The clusters, the step they imply, and that step against a healthy host's cost."""
    clusters = find_clusters(t.itl_total)
    main = int(np.argmax([c.observations for c in clusters])) if clusters else 0
    step = clusters[main].mean_seconds if clusters else math.nan
    step = step if math.isfinite(step) else fast
    healthy = host_seconds_per_step + batch * host_seconds_per_sequence
    slower = sum(c.observations for c in clusters[main + 1 :] if c.lower_seconds < GAP_SECONDS)
    arrivals = float(np.nansum(t.first_tokens))
    return dict(
        clusters=clusters,
        main_cluster=main,
        step_seconds=float(step),
        healthy_host_seconds=float(healthy),
        host_excess_ratio=(
            float((step - slowest_gpu) / healthy) if healthy > 0 else math.nan
        ),
        side_per_arrival=slower / arrivals if arrivals > 0 else math.nan,
    )  # fmt: skip


def _speculation_fields(t: Timeline, dep: Deployment, *, batch: float, context: float) -> dict:
    """Tokens per step from the counters and, where each position's acceptance is on the page,
    what speculation buys at this batch and context (`physics.speculative`; the draft's own
    cost is not on the page and left out, so a verdict that it does not pay is conservative)."""
    reading = t.speculation
    if reading is None or not math.isfinite(reading.tokens_per_step):
        return {}
    fields = {"spec_tokens_per_step": float(reading.tokens_per_step)}
    if reading.per_position is not None and math.isfinite(batch) and math.isfinite(context):
        s = speculative_step(dep, batch_size=max(round(batch), 1), context_tokens=context,
                             spec=reading.speculation())  # fmt: skip
        fields["spec_speedup"] = float(s.speedup)
        fields["spec_verify_seconds"] = float(s.verify_seconds)
    return fields


def fingerprint(
    timeline: Timeline,
    deployment: Deployment,
    *,
    max_num_batched_tokens: int,
    batch_size: float | None = None,
    context_tokens: float | None = None,
    prompt_tokens: float | None = None,
    host_seconds_per_step: float = 0.0,
    host_seconds_per_sequence: float = 0.0,
) -> Fingerprint:
    """Measure an incident: batch and context from the metrics unless given, then every feature;
    the host costs are what a healthy host spends per step (the calibration's terms)."""
    t = timeline
    batch, context, prompt, output = _batch_and_context(
        t, batch_size, context_tokens, prompt_tokens
    )
    mean_batch = _weighted_mean(batch, t.itl_counts)
    budget = int(max_num_batched_tokens)
    uncached = prompt * (1 - t.prefix_cache_hit_rate())
    floor_fields, fasts = _floor_and_fast(t, deployment, batch, context)
    slow_fields = _slow_mode(t, fasts, floor_fields["fast_mode_seconds"])
    spec_fields = _speculation_fields(t, deployment, batch=mean_batch, context=context)
    verify = spec_fields.get("spec_verify_seconds", 0.0)
    slowest_gpu = max(floor_fields["floor_seconds"], verify) / PLAUSIBLE_MBU_LOW
    expected_mixed = mixed_step(
        deployment, batch_size=mean_batch, context_tokens=context,
        chunk_tokens=max(budget - mean_batch, 0),
    ).step_seconds  # fmt: skip
    return Fingerprint(
        batch_size=mean_batch,
        context_tokens=context,
        context_from_counters=context_tokens is None,
        mean_prompt_tokens=prompt,
        uncached_prompt_tokens=uncached,
        mean_output_tokens=output,
        max_num_batched_tokens=budget,
        expected_mixed_step_seconds=float(expected_mixed),
        arrival_chunk_factor=_arrival_chunk_factor(
            deployment, batch=mean_batch, context=context, prompt=uncached, budget=budget
        ),
        observations=float(t.itl_total.count),
        **floor_fields,
        **slow_fields,
        **_growth(t, fasts, floor_fields["floor_seconds_by_window"]),
        **_gaps(t),
        **_stalls(t, deployment, fasts, floor_fields["fast_mode_seconds"], budget=budget,
                  uncached_share=1 - t.prefix_cache_hit_rate()),
        engine=t.engine,
        **spec_fields,
        **_cluster_fields(
            t, fast=floor_fields["fast_mode_seconds"], slowest_gpu=slowest_gpu, batch=mean_batch,
            host_seconds_per_step=host_seconds_per_step,
            host_seconds_per_sequence=host_seconds_per_sequence,
        ),
    )  # fmt: skip
