"""Updating a FigureWidget in place without tripping plotly's widget protocol.

plotly.js echoes every trace back to the kernel after a restyle; a property that Python holds as a
numpy array comes back as a typed-array dict, and plotly's `_remove_overlapping_props` then tests
the array's truth value (`ValueError: The truth value of an array ... is ambiguous`, raised in the
kernel, shown only in JupyterLab's log console). Plain lists round-trip cleanly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import plotly.graph_objects as go


def plain(value):
    """`value` with every numpy array (and numpy scalar) turned into lists and Python numbers."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def figure_widget(figure: go.Figure) -> go.FigureWidget:
    """A FigureWidget showing `figure`, its arrays held as lists."""
    data = [plain(trace.to_plotly_json()) for trace in figure.data]
    return go.FigureWidget(data=data, layout=figure.layout)


def update_traces(figure: go.FigureWidget, data: Iterable[Mapping]) -> None:
    """Give each trace of `figure`, in order, the properties in `data` (as plain lists)."""
    for trace, values in zip(figure.data, data, strict=True):
        trace.update(plain(values))
