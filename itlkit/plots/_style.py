"""Layout the figure builders share: figures that take their output area's width."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go

# Narrowest output area a figure is laid out for: JupyterLab at 1,000 px with the file browser
# open leaves about 600 px of output; a title line wider than this is wrapped.
TITLE_LINE_CHARS = 90


# A horizontal legend at the figure's foot, whatever the rows it wraps into: plotly reserves the
# bottom margin for it and sets the axes' tick labels and titles above it. A legend placed at a
# share of the plot's height below it (y=-0.1) lands on the axis titles when the plot is short
# (a long title, a narrow window).
FOOT_LEGEND = dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")


def responsive(fig: go.Figure, *, height: int, width: int | None = None) -> go.Figure:
    """`fig` sized by its container (plotly `autosize`), unless a `width` in px is asked for."""
    fig.update_layout(autosize=width is None, width=width, height=height)
    return fig


def title_margin_px(title: str, *, below: int = 40) -> int:
    """Top margin that holds `title`'s lines (about 18 px each at 13-14 px type) and `below`."""
    return below + 18 * (title.count("<br>") + 1)


def top_title(text: str, *, size: int = 13) -> dict:
    """A layout title hung from the figure's top edge: its lines grow down into the top margin
    (`title_margin_px`), never into the subplot titles below (plotly's default centres the first
    line in the margin and lets the others run down past it). plotly.js hangs the text about
    12 px above the pad (measured in Chromium): a 20 px pad leaves it 8 px below the edge."""
    return dict(text=text, font=dict(size=size), x=0.01, xanchor="left", y=1, yref="container",
                yanchor="top", pad=dict(t=20))  # fmt: skip


def wrap(text: str, *, chars: int = TITLE_LINE_CHARS, small: bool = False) -> str:
    """`text` broken into lines of at most `chars` characters with plotly's `<br>`, at the
    separators ' · ' first, then at spaces; `small` sets every line in `<sub>`."""
    lines, line = [], ""
    for part in text.split(" · "):
        candidate = f"{line} · {part}" if line else part
        if len(candidate) <= chars or not line:
            line = candidate
        else:
            lines.append(line)
            line = part
    lines.append(line)
    out = []
    for one in lines:
        out += textwrap.wrap(one, chars, break_on_hyphens=False) if len(one) > chars else [one]
    if small:
        return "<br>".join(f"<sub>{line}</sub>" for line in out)
    return "<br>".join(out)
