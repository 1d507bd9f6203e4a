"""Look and feel shared by the notebooks' widgets: labelled controls and the error banner."""

from __future__ import annotations

import html

import ipywidgets as widgets


def labelled(kind, description: str, *, width="460px", label_width="150px", **kwargs):
    """A control of type `kind` with a wide label (units go in `description`)."""
    return kind(
        description=description,
        style={"description_width": label_width},
        layout=widgets.Layout(width=width),
        **kwargs,
    )


def slider(kind, description: str, *, simulated: bool = False, **kwargs):
    """A labelled slider of type `kind`; one that drives the simulator (`simulated`) redraws only
    when released (`continuous_update=False`), a roofline one while it is dragged."""
    if simulated:
        kwargs = {"width": "480px", "label_width": "190px", "continuous_update": False, **kwargs}
    return labelled(kind, description, **kwargs)


BUSY_HTML = '<span style="color:#8a6d00">⟳ recomputing…</span>'


def busy_label():
    """An HTML line that reads "recomputing…" while a slow update runs (empty otherwise)."""
    label = widgets.HTML("")
    label.add_class("itlkit-busy")
    return label


def error_banner(title: str, message: str) -> str:
    """A red HTML banner: `title` in bold, then the message (escaped)."""
    return (
        '<div style="background:#fde2e1;border-left:4px solid #c00;padding:6px">'
        f"<b>{html.escape(title)}</b> {html.escape(message)}</div>"
    )
