"""What a page says of speculative decoding: tokens per step, and what that does to its ITL.

vLLM counts drafts, draft tokens and accepted tokens (per position too); its mean acceptance
length is 1 + accepted / drafts and position i's acceptance rate accepted_i / drafts
(`SpecDecodingProm`, vllm/v1/spec_decode/metrics.py @ 016a8587edb04ae53c913a1da9355a07dc0ca4ae).
SGLang exports the mean directly, `sglang:spec_accept_length` (accepted drafts + the bonus
token per forward; observability/metrics_collector.py @ 44cedc2b).

With E tokens per step, vLLM's ITL histogram holds one gap per step (its per-output-event view),
E tokens apart, while SGLang's holds E observations of gap / E (per token): the same step read
as a gap E times shorter. Counters that no server could write are refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from itlkit.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class SpeculationReading:
    """What the input says of speculative decoding over its period."""

    tokens_per_step: float  # NaN: drafts counted, acceptance not
    positions: int | None  # draft tokens per step (k), where the per-position counter gives it
    per_position: tuple[float, ...] | None  # acceptance of each position (vLLM), else None
    source: str

    def speculation(self, k: int | None = None, **kw):
        """The speculation read, as the step model takes it: its first `k` positions (all by
        default; `kw`: `Speculation`'s other fields); None without per-position acceptance."""
        from itlkit.physics.speculative import Speculation

        if self.per_position is None:
            return None
        rates = tuple(self.per_position[: k or self.positions])
        return Speculation(len(rates), rates, **kw)


def _period_total(frame: pd.DataFrame, key: str, *, position: bool = False):
    """A counter's total over the input: its increase between the first and last scrape, or
    its value since start for one scrape; summed over series (per `position` when asked)."""
    rows = frame[(frame["metric"] == key) & (frame["sample"] == "value")]
    if rows.empty:
        return None
    times = rows["timestamp_seconds"]
    first, last = times.min(), times.max()
    one = not (math.isfinite(first) and first < last)
    labels = rows["labels"].astype(str)
    group = labels.str.extract(r"position=([^,]*)")[0] if position else labels
    at_end = rows[times == last] if not one else rows
    end = at_end.groupby(group.loc[at_end.index])["value"].sum()
    if one:
        return end if position else float(end.sum())
    start = rows[times == first].groupby(group.loc[rows[times == first].index])["value"].sum()
    grown = end.sub(start, fill_value=0.0)
    if (grown < 0).any():  # a restart between the scrapes: count what came since it
        grown = end
    return grown if position else float(grown.sum())


def speculation_reading(frame: pd.DataFrame) -> SpeculationReading | None:
    """Tokens per step, and where vLLM's per-position counter gives them, the drafts per step
    and each position's acceptance (accepted_i / drafts); None without speculation. SourceError
    where the counters are impossible. Each counter is read once."""
    if (frame["metric"] == "spec_accept_length").any():
        rows = frame[frame["metric"] == "spec_accept_length"]
        value = float(rows.loc[rows["timestamp_seconds"].idxmax()
                               if rows["timestamp_seconds"].notna().any() else rows.index[-1],
                               "value"])  # fmt: skip
        if not value >= 1:
            raise SourceError(f"sglang:spec_accept_length is {value:g}: a step emits at least "
                              "its own token, so it is at least 1")  # fmt: skip
        return SpeculationReading(value, None, None, "sglang:spec_accept_length")
    drafts = _period_total(frame, "spec_drafts")
    accepted = _period_total(frame, "spec_accepted")
    if drafts is None and accepted is None:
        return None
    if accepted is None:
        return SpeculationReading(math.nan, None, None, (
            "vllm:spec_decode_num_drafts_total without vllm:spec_decode_num_accepted_tokens_total"
            ": how many tokens a step carried is unknown"
        ))  # fmt: skip
    drafts, accepted = drafts or 0.0, accepted or 0.0
    if drafts == 0:
        if accepted > 0:
            raise SourceError(
                f"vllm:spec_decode_num_accepted_tokens_total rose by {accepted:g} with no draft "
                "(vllm:spec_decode_num_drafts_total did not rise): no server counts accepted "
                "tokens it never drafted"
            )
        return None
    e = 1.0 + accepted / drafts
    source = "1 + vllm:spec_decode_num_accepted_tokens / num_drafts"
    positions = _period_total(frame, "spec_accepted_per_position", position=True)
    if positions is None or not len(positions):
        return SpeculationReading(e, None, None, source)
    k = len(positions)
    if accepted > k * drafts + 1e-9:
        raise SourceError(
            f"{accepted:g} accepted tokens over {drafts:g} drafts is {accepted / drafts:.2f} per "
            f"draft, more than the {k} positions a draft has"
        )
    ordered = positions.sort_index(key=lambda i: i.astype(int))
    rates = tuple(min(float(v) / drafts, 1.0) for v in ordered.to_numpy())
    return SpeculationReading(e, k, rates, source)


def speculation_note(frame: pd.DataFrame, itl_family: str) -> str | None:
    """What speculation does to this page's ITL, in one line (None without speculation)."""
    reading = speculation_reading(frame)
    if reading is None:
        return None
    e, source = reading.tokens_per_step, reading.source
    if math.isnan(e):
        return f"speculative decoding: {source}, so the tokens per ITL gap are unknown"
    if e <= 1.0 + 1e-9:
        return None
    if itl_family.startswith("sglang:"):
        view = (f"SGLang's ITL splits each step's gap into {e:.2f} observations of gap / "
                f"{e:.2f}: a step takes ~{e:.2f}x the per-token gap read here")  # fmt: skip
    else:
        view = (f"vLLM's ITL observes one gap per step, {e:.2f} tokens apart: the per-token "
                f"latency is ~{1 / e:.2f}x the gap read here")  # fmt: skip
    return f"speculative decoding: {e:.2f} tokens per step ({source}); {view}"
