"""Updating a FigureWidget in place without tripping plotly's widget protocol.

plotly.js echoes every trace back to the kernel after a restyle; a property that Python holds as a
numpy array comes back as a typed-array dict, and plotly's `_remove_overlapping_props` then tests
the array's truth value (`ValueError: The truth value of an array ... is ambiguous`, raised in the
kernel, shown only in JupyterLab's log console). Plain lists round-trip cleanly.

A redraw hands plotly only the properties that differ from what the figure holds: plotly
validates every value it is given before it finds that most of them did not change (a 200-point
curve costs about 1 ms), so a slider that moves one marker would pay for every curve.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Mapping
from importlib.resources import files

import anywidget
import ipywidgets
import numpy as np
import plotly
import plotly.graph_objects as go
import traitlets


def plain(value):
    """`value` with every numpy array (and numpy scalar) turned into lists and Python numbers."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


# Why plotly's own FigureWidget froze under Voila (issue 18; the evidence is in tests/
# test_present.py): anywidget gives each model 2 s from its creation to load and initialise its
# ESM, and otherwise rejects the model's `ready` promise; every kernel message to the model first
# awaits that promise (anywidget 0.9-0.11, `AnyModel._handle_comm_msg` and `Runtime`), so a late
# model silently drops every update for the rest of the page's life. plotly's ESM is its whole
# widget bundle (plotly.js, 4.9 MB), parsed and run once per figure: at page load Voila creates
# every model at once, and on a 2-core machine the second figure's bundle finished 3.0 s after
# its model was made (the first 1.8 s). Its view was drawn, the slider moved, the kernel's
# messages arrived, and the figure never changed again.
#
# The ESM below is small, so anywidget's deadline is met in milliseconds. It loads plotly's
# bundle once per page (shared by every figure) and outside that deadline, holds the kernel's
# messages that come before the bundle has loaded and hands them to plotly's model in order, and
# draws each view once the bundle is there. It also fixes a second freeze: plotly registers a
# view's listeners on the model for good, so after a view is removed (its cell re-run, a box
# re-filled) the dead view's listener throws on its purged plot before the live view's runs
# ("Error setting state: ... '_guiEditing'"); here each view's listeners go with the view.
#
# Loading the bundle blocks the page: 1.4-1.7 s in a blank Chromium page on a 2-core machine,
# 2.4 s while JupyterLab ran notebook 06 (a long task, traced with a PerformanceObserver). A
# model made before that block whose small ESM has not loaded yet waits behind it and misses its
# deadline all the same (06's second figure and its width-fitting widget: a fresh-clone CI run
# failed on it, and so did 06's first opening here, idle).
# So the bundle waits for every itlkit widget the kernel has open: each one's `_page_key` is
# listed on the PlotlyBundle model when it opens, and its ESM announces the key on the page when
# it loads. Once every listed key has been announced and no new one has come for a quarter
# second, the bundle loads; a model the kernel makes after that waits out the block before its
# deadline starts (the page handles no kernel message while it is blocked). A model that never
# loads holds the bundle back 10 s at most.
_LOADED_JS = """
const LOADED = Symbol.for("itlkit.widget-models-loaded");

function loadedModels() {  // the page keys of the itlkit models whose ESM has loaded here
  return (globalThis[LOADED] ??= { keys: new Set(), events: new EventTarget() });
}

function announce(model) {  // called as a model's ESM initialises: anywidget's deadline is met
  const page = loadedModels();
  page.keys.add(model.get("_page_key"));
  page.events.dispatchEvent(new Event("loaded"));
}
"""

_FIGURE_ESM = """
const KEY = Symbol.for("itlkit.plotly-widget-bundle/%(digest)s");
const MESSAGES = ["_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces",
  "_py2js_restyle", "_py2js_relayout", "_py2js_update", "_py2js_animate",
  "_py2js_removeLayoutProps", "_py2js_removeTraceProps"];

function everyModelLoaded(bundle) {  // see the notes above _LOADED_JS
  const page = loadedModels();
  return new Promise((resolve) => {
    let quiet = null;
    const check = () => {
      clearTimeout(quiet);
      if (bundle.get("members").every((key) => page.keys.has(key))) quiet = setTimeout(done, 250);
    };
    const giveUp = setTimeout(() => done(), 10000);
    const done = () => {
      clearTimeout(quiet);
      clearTimeout(giveUp);
      bundle.off("change:members", check);
      page.events.removeEventListener("loaded", check);
      resolve();
    };
    bundle.on("change:members", check);
    page.events.addEventListener("loaded", check);
    check();
  });
}

async function loadBundle(model) {
  const ref = model.get("_plotly_bundle");  // "IPY_MODEL_<id>" of the kernel's PlotlyBundle
  const bundle = await model.widget_manager.get_model(ref.slice("IPY_MODEL_".length));
  await everyModelLoaded(bundle);
  const url = URL.createObjectURL(new Blob([bundle.get("source")], { type: "text/javascript" }));
  return import(url).finally(() => URL.revokeObjectURL(url));
}

function plotlyBundle(model) {  // one module per page, whichever figure asks first
  return (globalThis[KEY] ??= loadBundle(model));
}

export default () => {
  let plotly = null;  // plotly's own { initialize, render } for this model, once loaded
  let loaded = null;
  let viewListeners = null;  // while a view renders, the listeners it adds
  return {
    initialize({ model }) {
      announce(model);
      const early = [];  // messages that came before plotly's model listened: [name, value]
      const hold = MESSAGES.map((name) => {
        const listener = () => early.push([name, model.get(name)]);
        model.on(`change:${name}`, listener);
        return [name, listener];
      });
      const replaying = new Map();
      const listeners = [];
      const proxy = {
        get: (name) => (replaying.has(name) ? replaying.get(name) : model.get(name)),
        set: (...args) => model.set(...args),
        save_changes: () => model.save_changes(),
        send: (...args) => model.send(...args),
        on: (event, listener) => {
          model.on(event, listener);
          (viewListeners ?? listeners).push([event, listener]);
        },
        off: (...args) => model.off(...args),
        widget_manager: model.widget_manager,
      };
      loaded = plotlyBundle(model).then((bundle) => {
        plotly = bundle.default();
        plotly.initialize({ model: proxy });
        hold.forEach(([name, listener]) => model.off(`change:${name}`, listener));
        for (const [name, value] of early) {
          replaying.set(name, value);
          listeners.filter(([event]) => event === `change:${name}`).forEach(([, f]) => f());
          replaying.delete(name);
        }
        return model;
      });
      loaded.catch((error) => console.error("[itlkit] plotly's widget bundle failed", error));
    },
    async render({ el }) {
      const model = await loaded;
      const mine = [];
      viewListeners = mine;
      let remove;
      try {
        remove = plotly.render({ el });
      } finally {
        viewListeners = null;
      }
      return () => {
        mine.forEach(([event, listener]) => model.off(event, listener));
        if (typeof remove === "function") remove();
      };
    },
  };
};
"""


def _plotly_bundle() -> str:
    """plotly's widget bundle (its FigureWidget's JavaScript and plotly.js)."""
    return (files("plotly") / "package_data" / "widgetbundle.js").read_text(encoding="utf-8")


def _figure_esm(bundle: str) -> str:
    digest = hashlib.sha256(bundle.encode()).hexdigest()[:16]
    return _LOADED_JS + _FIGURE_ESM % {"digest": f"{plotly.__version__}-{digest}"}


class PlotlyBundle(ipywidgets.Widget):
    """plotly's widget bundle as a model of its own (a plain `WidgetModel`, no view, no ESM):
    the kernel sends its 4.9 MB once, and every figure refers to it. `members` lists the page
    keys of itlkit's open widgets, which the page lets load before the bundle."""

    source = traitlets.Unicode(_plotly_bundle()).tag(sync=True)
    members = traitlets.List(traitlets.Unicode()).tag(sync=True)


_shared: list[PlotlyBundle] = []  # the kernel's one open PlotlyBundle


def _bundle_if_open() -> PlotlyBundle | None:
    """The kernel's PlotlyBundle while it is open, else None."""
    return _shared[0] if _shared and _shared[0].comm is not None else None


def shared_bundle() -> PlotlyBundle:
    """The kernel's PlotlyBundle, opened anew if it was closed (`Widget.close_all()`)."""
    if _bundle_if_open() is None:
        _shared[:] = [PlotlyBundle()]
    return _shared[0]


class _Member(ipywidgets.Widget):
    """An itlkit widget with an ESM: listed on the PlotlyBundle while it is open."""

    _page_key = traitlets.Unicode().tag(sync=True)

    @traitlets.default("_page_key")
    def _new_page_key(self) -> str:
        return uuid.uuid4().hex

    def open(self) -> None:
        super().open()
        bundle = shared_bundle()
        bundle.members = [*bundle.members, self._page_key]

    def close(self) -> None:
        bundle = _bundle_if_open()
        if bundle is not None and self._page_key in bundle.members:
            bundle.members = [key for key in bundle.members if key != self._page_key]
        super().close()


class FigureWidget(_Member, go.FigureWidget):
    """plotly's FigureWidget with a small ESM (see `_FIGURE_ESM`): it meets anywidget's 2-s
    load deadline, loads plotly's bundle once per page from the kernel's one PlotlyBundle, and
    drops a removed view's listeners. The ESM is a class attribute, so the model's first state
    carries it (no second ESM)."""

    _plotly_bundle = traitlets.Instance(PlotlyBundle).tag(
        sync=True, **ipywidgets.widget_serialization
    )
    _esm = _figure_esm(PlotlyBundle.source.default_value)

    @traitlets.default("_plotly_bundle")
    def _open_bundle(self) -> PlotlyBundle:
        return shared_bundle()


def figure_widget(figure: go.Figure) -> FigureWidget:
    """A FigureWidget showing `figure`, its arrays held as lists."""
    data = [plain(trace.to_plotly_json()) for trace in figure.data]
    widget = FigureWidget(data=data, layout=figure.layout)
    widget._config = {"responsive": True}  # plotly.js resizes it on every window resize
    return widget


def changes(held: Mapping | None, wanted: Mapping, *, nested: bool = False) -> Iterator:
    """(dotted path, value) of each property in `wanted` that `held` does not hold already.

    A property below the top level that `held` has and `wanted` lacks comes back as None
    (removed), as plotly's `update(..., overwrite=True)` replaces a whole nested object; one at
    the top level is kept, as there. `wanted` holds plain values (see `plain`)."""
    held = held or {}
    for key, value in wanted.items():
        old = held.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            yield from ((f"{key}.{path}", v) for path, v in changes(old, value, nested=True))
        elif old != value and not (value == [] and not old):
            yield key, value
    if nested:
        yield from ((key, None) for key in held.keys() - wanted.keys())


def _apply(target, wanted: Mapping) -> None:
    # plotly keeps what the kernel set (not plotly.js's defaults) in `_props`, plain as sent
    for path, value in list(changes(target._props, wanted)):
        target[path] = value


def update_traces(figure: go.FigureWidget, data: Iterable[Mapping]) -> None:
    """Give each trace of `figure`, in order, the properties in `data` (as plain lists); only
    those that changed reach plotly."""
    for trace, values in zip(figure.data, data, strict=True):
        _apply(trace, plain(values))


def update_figure(figure: go.FigureWidget, spec: Mapping) -> None:
    """Make `figure` show `spec` ({"data": traces, "layout": ...}, same traces in the same
    order), sending only what changed; call it inside `figure.batch_update()`. Annotations are
    replaced as a whole (none in `spec`: none shown); the template is left alone."""
    update_traces(figure, [{k: v for k, v in t.items() if k != "type"} for t in spec["data"]])
    _apply(figure.layout, {"annotations": [], **plain(spec["layout"])})


# plotly's FigureWidget draws itself before JupyterLab or Voila has attached it to the page, so
# an autosized figure starts at plotly's default 700 px and never hears of later size changes
# (its resize hooks are Lumino messages, which anywidget views do not get). This watcher sits in
# the explorer's box and refits every figure in it whose drawn width differs from its container's:
# when the box or a figure changes size, when a figure scrolls into view, and on a short schedule
# after each (a figure drawn while still hidden ignores the first refit). JupyterLab 4 skips the
# layout of cells out of view (its default windowing mode, `contentVisibility`). Notebook 04's
# first figure is out of view after "run all"; when the file browser collapsed, it usually
# followed within 3 s, but in 4 of 5 CI runs (2026-12-06 to 08) it stayed 1,488 px wide in the
# 1,740 px area for the 8.8 s the test waited (why, not found: plotly had computed the new width
# and not drawn it). What a reader sees is a figure in view, so a figure is also refitted as it
# scrolls into view. A responsive figure keeps its refit handler on its element
# (`_responsiveChartHandler`); the window resize event it listens to is the fallback.
_FIT_ESM = (
    _LOADED_JS
    + """
export default {
  initialize({ model }) {
    announce(model);
  },
  render({ el }) {
    el.classList.add("itlkit-fit-figures");
    let box = null, tries = 0, checks = [];
    const misfit = (gd) => {
      const svg = gd.querySelector(".main-svg"), host = gd.parentElement;
      if (!svg || !host || !gd.offsetParent) return false;
      return Math.abs(svg.getBoundingClientRect().width - host.clientWidth) > 2;
    };
    const refit = () => {
      const figures = [...box.querySelectorAll(".js-plotly-plot")].filter(misfit);
      figures.forEach((gd) => gd._responsiveChartHandler && gd._responsiveChartHandler());
      if (figures.some((gd) => !gd._responsiveChartHandler)) {
        window.dispatchEvent(new Event("resize"));
      }
    };
    const fit = () => {  // now, and again while the page settles
      checks.forEach(clearTimeout);
      checks = [0, 100, 300, 700, 1500, 3000, 6000].map((ms) => setTimeout(refit, ms));
    };
    const sizes = new ResizeObserver(fit);
    const shown = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) fit();
    });
    const seen = new WeakSet();
    const scan = () => box.querySelectorAll(".main-svg").forEach((svg) => {
      if (seen.has(svg)) return;
      seen.add(svg);
      sizes.observe(svg);
      shown.observe(svg.closest(".js-plotly-plot") || svg);
      fit();
    });
    const drawn = new MutationObserver(scan);
    const watch = () => {
      // anywidget renders into a detached element: wait until it is in the page, in the box
      if (!el.isConnected) { if (tries++ < 1200) requestAnimationFrame(watch); return; }
      box = el.closest(".widget-box") || el.parentElement;
      sizes.observe(box);
      drawn.observe(box, { childList: true, subtree: true });
      scan();
      fit();
    };
    watch();
    return () => {
      sizes.disconnect(); shown.disconnect(); drawn.disconnect(); checks.forEach(clearTimeout);
    };
  }
};
"""
)


class FitFiguresToWidth(_Member, anywidget.AnyWidget):
    """An invisible widget: responsive figures in the same box follow the box's width."""

    _esm = traitlets.Unicode(_FIT_ESM).tag(sync=True)
