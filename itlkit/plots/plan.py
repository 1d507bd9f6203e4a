"""Notebook 06's figure: every simulated candidate's cost against its ITL p99 and TTFT p99,
the SLO targets as lines, the Pareto frontier, and the best candidate ringed."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from itlkit.plan.frontier import pareto, ranked
from itlkit.plan.space import Slo
from itlkit.plots._style import FOOT_LEGEND, responsive, top_title, wrap
from itlkit.units import MILLISECOND

# (Slo field, quantity, unit symbol, seconds per unit) of each panel
PANELS = (("itl_p99", "ITL p99", "ms", MILLISECOND), ("ttft_p99", "TTFT p99", "s", 1.0))
COLOURS = {"meets": "#4C72B0", "misses": "#C44E52", "frontier": "#55A868", "best": "#000000"}


def _points(results, slo: Slo, key: str, unit: float, which: str) -> dict:
    simulated = [r for r in results if r.outcome is not None and not r.outcome.problem]
    chosen = {
        "meets": [r for r in simulated if r.meets(slo)],
        "misses": [r for r in simulated if not r.meets(slo)],
        "frontier": pareto(simulated, key),
        "best": ranked(simulated, slo, "cost_per_hour")[:1],
    }[which]
    return {
        "x": [r.cost_per_hour for r in chosen],
        "y": [getattr(r.outcome, f"{key}_seconds") / unit for r in chosen],
        "text": [r.candidate.label() for r in chosen],
    }


def _target_line(results, slo: Slo, key: str, unit: float) -> dict:
    """The SLO target as a dashed line across the costs (empty without a target)."""
    target = getattr(slo, f"{key}_seconds")
    costs = [r.cost_per_hour for r in results] or [0.0]
    if target is None:
        return {"x": [], "y": [], "text": []}
    return {"x": [min(costs), max(costs)], "y": [target / unit] * 2, "text": ["target"] * 2}


def trace_data(results, slo: Slo) -> list[dict]:
    """x (dollars per hour), y and hover text of every trace, in the figure's order: per
    panel the candidates that meet, miss, the frontier, the best, then the target."""
    return [item for key, _, _, unit in PANELS
            for item in (*(_points(results, slo, key, unit, which) for which in COLOURS),
                         _target_line(results, slo, key, unit))]  # fmt: skip


def figure_title(results, slo: Slo) -> str:
    """The cheapest candidate that meets the targets, which the title names (a moved target
    is seen in the title even where the answer stays)."""
    best = ranked(results, slo, "cost_per_hour")
    targets = targets_text(slo)
    if not best:
        return wrap(f"no candidate meets {targets}: loosen a target or widen the space")
    b = best[0]
    return wrap(f"cheapest that meets {targets}: {b.candidate.label()}, "
                f"${b.cost_per_hour:,.2f}/h")  # fmt: skip


def targets_text(slo: Slo) -> str:
    """The panels' targets in words: "ITL p99 ≤ 50 ms and TTFT p99 ≤ 1 s"."""
    parts = []
    for key, name, symbol, unit in PANELS:
        target = getattr(slo, f"{key}_seconds")
        if target is not None:
            parts.append(f"{name} ≤ {target / unit:.3g} {symbol}")
    return " and ".join(parts) or "no target"


def plan_figure(results, slo: Slo, *, width: int | None = None, height: int = 460) -> go.Figure:
    """Cost against each SLO quantity (log y), the targets dashed."""
    titles = tuple(f"cost against {name}" for _, name, _, _ in PANELS)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=titles)
    data = trace_data(results, slo)
    i = 0
    for col, (_, name, symbol, _) in enumerate(PANELS, 1):
        for which, colour in COLOURS.items():
            mode = "lines+markers" if which == "frontier" else "markers"
            marker = dict(color=colour, size=14 if which == "best" else 8,
                          symbol="circle-open" if which == "best" else "circle")  # fmt: skip
            fig.add_trace(go.Scatter(**data[i], mode=mode, name=which, marker=marker,
                                     showlegend=col == 1, legendgroup=which,
                                     hovertemplate="%{text}<br>$%{x:.2f}/h, %{y:.3g}"),
                          row=1, col=col)  # fmt: skip
            i += 1
        fig.add_trace(go.Scatter(**data[i], mode="lines", name="SLO target", showlegend=col == 1,
                                 legendgroup="target", line=dict(dash="dash", color="#888"),
                                 hoverinfo="skip"), row=1, col=col)  # fmt: skip
        i += 1
        fig.update_xaxes(title_text="cost ($ per hour)", row=1, col=col)
        fig.update_yaxes(title_text=f"{name} ({symbol})", type="log", row=1, col=col)
    fig.update_layout(title=top_title(figure_title(results, slo)), legend=FOOT_LEGEND,
                      margin=dict(t=80, b=90))  # fmt: skip
    return responsive(fig, height=height, width=width)
