"""Look and feel shared by the notebooks' widgets: labelled controls and the error banner."""

from __future__ import annotations

import html

import ipywidgets as widgets

# Two columns of controls fit side by side in the output area of JupyterLab at 1,280 px with the
# file browser open (848 px: 2 x 400 px, their margins and the 24 px gap); at 460 px they wrapped
# into one column and pushed notebooks 01's and 02's figures below the window's bottom edge.
CONTROL_WIDTH = "400px"


def labelled(kind, description: str, *, width=CONTROL_WIDTH, label_width="150px", **kwargs):
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
        kwargs = {"label_width": "180px", "continuous_update": False, **kwargs}
    return labelled(kind, description, **kwargs)


def checkbox(description: str, *, value: bool = False) -> widgets.Checkbox:
    """A checkbox as wide as its description (the default width cut long ones with "…")."""
    return widgets.Checkbox(value=value, description=description, indent=False,
                            layout=widgets.Layout(width="auto"))  # fmt: skip


def columns(*boxes) -> widgets.HBox:
    """Control columns side by side where they fit, one under another where they do not (a
    narrow output area would otherwise squeeze them and clip their labels and readouts)."""
    return widgets.HBox(list(boxes), layout=widgets.Layout(flex_flow="row wrap",
                                                          grid_gap="4px 24px"))  # fmt: skip


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
