"""The kernel side of itlkit's figure widget: plotly's bundle goes to the page once, as one
model every figure refers to, and that model lists the itlkit widgets the page must let load
before it runs the bundle (the browser side: tests/test_figure_widget_loading.py)."""

from __future__ import annotations

from importlib.resources import files

import plotly.graph_objects as go
import pytest

from itlkit.widgets import _figure
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, shared_bundle

BUNDLE_BYTES = len((files("plotly") / "package_data" / "widgetbundle.js").read_text("utf-8"))


@pytest.fixture(autouse=True)
def own_bundle(monkeypatch):
    """Each test opens and closes bundles of its own: the other tests' figures keep theirs."""
    monkeypatch.setattr(_figure, "_shared", [])


def _new_figure():
    return figure_widget(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))


def test_figures_share_one_bundle_and_their_state_carries_only_a_reference():
    first, second = _new_figure(), _new_figure()
    assert first._plotly_bundle is second._plotly_bundle
    assert len(first._plotly_bundle.source) == BUNDLE_BYTES > 4_000_000
    state = first.get_state()
    assert state["_plotly_bundle"] == f"IPY_MODEL_{first._plotly_bundle.model_id}"
    assert len(str(state["_esm"])) < 10_000  # the deadline-sized ESM, not plotly's bundle
    first.close()
    second.close()


def test_the_bundle_lists_each_open_widget_until_it_closes():
    figure, fit = _new_figure(), FitFiguresToWidth()
    members = shared_bundle().members
    assert members[-2:] == [figure._page_key, fit._page_key]
    assert figure._page_key != fit._page_key
    assert figure.get_state()["_page_key"] == figure._page_key  # the page reads it
    figure.close()
    assert figure._page_key not in shared_bundle().members
    assert fit._page_key in shared_bundle().members
    fit.close()
    assert fit._page_key not in shared_bundle().members


def test_a_closed_bundle_is_opened_anew_and_lists_only_what_opened_since():
    old = _new_figure()
    bundle = old._plotly_bundle
    bundle.close()  # as `Widget.close_all()` may, before the figure
    old.close()
    figure = _new_figure()
    assert figure._plotly_bundle is not bundle
    assert figure._plotly_bundle.comm is not None
    assert shared_bundle().members == [figure._page_key]
    figure.close()
