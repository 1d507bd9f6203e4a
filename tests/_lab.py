"""Driving the notebooks in a real JupyterLab (or Voilà) page with Playwright: open and run a
notebook, hear what the kernel says, measure the layout from the DOM, time a redraw.

Shared by the browser tests and benchmarks/bench_browser.py. Every wait is bounded
(shared/spec/jupyter-testing.md, pitfalls 2 and 3): JavaScript commands are fired and
forgotten, then Playwright's timed waits watch the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

# JupyterLab 4 asks "Would you like to get notified about official Jupyter news?" in a toast over
# the figures' lower right corner for as long as the setting `fetchNews` of
# @jupyterlab/apputils-extension:notification is "none" (its default; the announcements plugin,
# JupyterLab 4.6). `--LabApp.news_url=None` only stops the server fetching the feed: the toast
# still came. An overrides.json in JupyterLab's application settings directory answers "no";
# the Makefile's `lab` target writes the same file into the venv's
# (share/jupyter/lab/settings), the test servers get their own (lab_options).
LAB_SETTINGS_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


def lab_options(base: Path) -> list[str]:
    """`jupyter lab` options for a test server under `base`: application settings whose
    overrides.json turns the news toast off (LAB_SETTINGS_OVERRIDES)."""
    settings = base / "app-settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(LAB_SETTINGS_OVERRIDES))
    return [f"--LabApp.app_settings_dir={settings}"]


# The toolbar reads "idle" before any kernel is attached; running cells then pops "Select Kernel"
# and the test hangs (pitfall 2). Wait for the session's own kernel instead.
KERNEL_READY = """() => {
    const kernel = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;
    return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""

# Every error and stderr stream the kernel publishes, whichever cell or widget callback caused it
# (a callback's traceback reaches no cell: JupyterLab shows it in its log console only). Each
# entry names the message that caused it when that was a comm_open (see _BENIGN).
KERNEL_ATTACHED = "() => !!window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel"
LISTEN_TO_KERNEL = """() => {
    window.__itlkitKernelErrors = [];
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    kernel.iopubMessage.connect((_, msg) => {
        const type = msg.header.msg_type, content = msg.content;
        if (type === 'error') {
            window.__itlkitKernelErrors.push(content.ename + ': ' + content.evalue);
        } else if (type === 'stream' && content.name === 'stderr') {
            const cause = msg.parent_header?.msg_type === 'comm_open' ? ' on comm_open' : '';
            window.__itlkitKernelErrors.push('stderr' + cause + ': ' + content.text);
        }
    });
}"""

# Figures, titles, legends and labels measured against their boxes. A figure must lie inside
# its output area; a title, subplot title or legend inside its figure; a label must not be cut.
LAYOUT_PROBLEMS = """(only) => {  // only: one figure's index, or null for all
    const problems = [];
    const inside = (inner, outer, slack) => inner.left >= outer.left - slack
        && inner.right <= outer.right + slack && inner.top >= outer.top - slack
        && inner.bottom <= outer.bottom + slack;
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    plots.forEach((plot, i) => {
        if (only !== null && only !== undefined && i !== only) return;
        const svg = plot.querySelector('svg.main-svg');
        const area = plot.closest('.jp-OutputArea-output') || plot.parentElement;
        if (!svg) { problems.push(`figure ${i}: not drawn`); return; }
        const box = svg.getBoundingClientRect(), areaBox = area.getBoundingClientRect();
        if (box.width < 0.95 * areaBox.width) {
            problems.push(`figure ${i}: ${box.width.toFixed(0)} px wide in a ` +
                `${areaBox.width.toFixed(0)} px output area (does not fill it)`);
        }
        if (!inside(box, areaBox, 1)) {
            const [l, r] = [box.left, box.right].map((v) => v.toFixed(0));
            const [al, ar] = [areaBox.left, areaBox.right].map((v) => v.toFixed(0));
            problems.push(`figure ${i} (${l}..${r} px) outside its output area (${al}..${ar})`);
        }
        const parts = plot.querySelectorAll('.gtitle, .g-gtitle text, .annotation-text, .legend');
        parts.forEach((part) => {
            const b = part.getBoundingClientRect();
            if (b.width === 0) return;
            if (!inside(b, box, 2)) {
                const text = (part.textContent || '').slice(0, 60);
                const [l, r] = [b.left, b.right].map((v) => v.toFixed(0));
                const [fl, fr] = [box.left, box.right].map((v) => v.toFixed(0));
                problems.push(`figure ${i}: "${text}" clipped (${l}..${r}, figure ${fl}..${fr})`);
            }
        });
    });
    // hidden by a box too narrow for its controls (the box clips what overflows it), or
    // reaching past the notebook's output area
    const outside = (element) => {
        const b = element.getBoundingClientRect();
        if (!b.width) return false;
        for (let box = element.parentElement.closest('.widget-box'); box;
             box = box.parentElement.closest('.widget-box')) {
            const o = box.getBoundingClientRect();
            if (getComputedStyle(box).overflowX !== 'visible' && (b.right > o.right + 1
                || b.left < o.left - 1)) return true;
        }
        const area = element.closest('.jp-OutputArea-output');
        return !!area && b.right > area.getBoundingClientRect().right + 1;
    };
    const labels = '.widget-label, .widget-readout, .widget-checkbox label, .widget-checkbox span, '
        + '.jupyter-button';
    document.querySelectorAll(labels).forEach((label) => {
        if (label.offsetParent && label.scrollWidth > label.clientWidth + 1) {
            problems.push(`label cut: "${label.textContent}"`);
        }
        if (outside(label)) problems.push(`label outside its box: "${label.textContent}"`);
    });
    document.querySelectorAll('.widget-inline-hbox select, .widget-inline-hbox input')
        .forEach((field) => {
            const label = field.closest('.widget-inline-hbox').querySelector('.widget-label');
            if (field.offsetParent && outside(field)) {
                problems.push(`field outside its box: "${label ? label.textContent : field.type}"`);
            }
        });
    return problems;
}"""

# What plotly draws inside each figure, measured on its SVG: a legend must not cover an axis title
# or a tick label, a marker's text must lie inside its subplot's plot area (plotly clips it there:
# "now" near the left edge read "ow"), every row of a heatmap must be labelled, and the tick
# labels of a linear axis must step by 1, 2, 2.5 or 5 times a power of ten (an overlaying axis
# synced to its partner's grid read 0.99 / 1.99 / 2.98 requests/s).
FIGURE_PROBLEMS = """() => {
    const problems = [];
    const overlap = (p, q) => Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1
        && Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1;
    const inside = (inner, outer) => inner.left >= outer.left - 1 && inner.right <= outer.right + 1
        && inner.top >= outer.top - 1 && inner.bottom <= outer.bottom + 1;
    const tickLabels = (plot, axis) => [...plot.querySelectorAll(`g.${axis}tick > text`)]
        .map((t) => t.textContent.trim()).filter((t) => t);
    const round = (step) => {
        const mantissa = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
        return [1, 2, 2.5, 5, 10].some((m) => Math.abs(mantissa - m) < 1e-6 * m);
    };
    document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
        const texts = [...plot.querySelectorAll('text')].filter((t) => t.textContent.trim());
        const labels = texts.map((t) => {
            if (/^[xy][0-9]*title$/.test(t.getAttribute('class') || '')) return ['axis title', t];
            const group = t.parentNode.getAttribute('class') || '';
            return /^[xy][0-9]*tick$/.test(group) ? ['tick label', t] : null;
        }).filter((label) => label);
        plot.querySelectorAll('g.legend').forEach((legend) => {
            const box = legend.getBoundingClientRect();
            labels.forEach(([kind, t]) => {
                const b = t.getBoundingClientRect();
                if (box.width && overlap(box, b)) {
                    const dy = Math.min(box.bottom, b.bottom) - Math.max(box.top, b.top);
                    problems.push(`figure ${i}: the legend covers the ${kind} ` +
                        `"${t.textContent}" (${dy.toFixed(0)} px deep)`);
                }
            });
        });
        plot.querySelectorAll('.textpoint text').forEach((t) => {
            const subplot = t.closest('g.subplot');
            const id = subplot && [...subplot.classList].find((c) => /^x[0-9]*y[0-9]*$/.test(c));
            const area = id && plot.querySelector(`.draglayer g.${id} > rect.nsewdrag`);
            if (!t.textContent.trim() || !area) return;
            const b = t.getBoundingClientRect(), a = area.getBoundingClientRect();
            if (!inside(b, a)) {
                const [l, r, top] = [b.left - a.left, b.right - a.left, b.top - a.top]
                    .map((v) => v.toFixed(0));
                problems.push(`figure ${i}: "${t.textContent}" clipped by its plot area ` +
                    `(${l}..${r} px across, ${top} px down, in ${a.width.toFixed(0)} x ` +
                    `${a.height.toFixed(0)})`);
            }
        });
        const layout = plot._fullLayout || {};
        (plot._fullData || []).filter((trace) => trace.type === 'heatmap' && trace.visible)
            .forEach((trace) => {
                const rows = new Set(trace.y.map(String));
                const shown = tickLabels(plot, trace.yaxis).filter((t) => rows.has(t));
                if (shown.length < rows.size) {
                    problems.push(`figure ${i}: ${shown.length} of the heatmap's ${rows.size} ` +
                        `rows labelled (${shown.join(', ')})`);
                }
            });
        Object.keys(layout).filter((k) => /^[xy]axis[0-9]*$/.test(k)).forEach((k) => {
            const axis = layout[k];
            if (axis.type !== 'linear' || !axis.visible || !axis.showticklabels) return;
            const shown = tickLabels(plot, axis._id);
            const number = (t) => Number(t.replace(/[,%\\s]/g, '').replace('\u2212', '-'));
            const values = shown.map(number);
            if (values.length < 2 || values.some((v) => !Number.isFinite(v))) return;
            const steps = values.slice(1).map((v, j) => v - values[j]);
            const step = Math.abs(steps[0]);
            const even = steps.every((s) => Math.abs(Math.abs(s) - step) <= 1e-6 * step);
            const onGrid = values.every((v) => Math.abs(v / step - Math.round(v / step)) < 1e-6);
            if (!(step > 0 && even && round(step) && onGrid)) {
                const title = axis.title && axis.title.text ? ` (${axis.title.text})` : '';
                problems.push(`figure ${i}: ${axis._id} ticks not round${title}: ` +
                    shown.join(' / '));
            }
        });
    });
    return problems;
}"""

# The first figure's cell scrolled to the top of the notebook: the share of that figure the
# window shows (the controls above it pushed notebooks 01's and 02's below the window's bottom
# edge at 1,280 px with the file browser open).
FIRST_FIGURE_IN_VIEW = """() => {
    const plot = document.querySelector('.jp-Notebook .js-plotly-plot');
    const cell = plot && plot.closest('.jp-Cell');
    if (!cell) return null;
    cell.scrollIntoView({block: 'start'});
    const box = plot.getBoundingClientRect();
    const notebook = plot.closest('.jp-WindowedPanel-outer, .jp-Notebook').getBoundingClientRect();
    const bottom = Math.min(window.innerHeight, notebook.bottom);
    return {top: box.top, height: box.height, shown: Math.max(0, bottom - box.top) / box.height};
}"""

# JupyterLab's toasts (react-toastify): "Would you like to get notified about official Jupyter
# news?" sits over the figures' lower right corner until answered.
TOASTS = """() => [...document.querySelectorAll('.Toastify__toast')]
    .map((toast) => toast.textContent.trim())"""

TITLES = """() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]
    .map((t) => t.textContent)"""
TITLE_CONTAINS = """(part) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]
    .some((title) => title.textContent.includes(part))"""

# Key press -> the title of figure `index` changes (plotly draws the title last): the keydown
# listener starts the clock, a MutationObserver stops it; both live in the page.
ARM_REDRAW_TIMER = """(index) => {
    window.__itlkitRedrawMs = null;
    const title = () => document.querySelectorAll('.js-plotly-plot .gtitle')[index]?.textContent;
    const before = title();
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    let start = 0;
    const observer = new MutationObserver(() => {
        if (start && title() !== before) {
            observer.disconnect();
            window.__itlkitRedrawMs = performance.now() - start;
        }
    });
    observer.observe(plot, {subtree: true, childList: true, characterData: true});
    document.addEventListener('keydown', () => { start = start || performance.now(); },
                              {capture: true, once: true});
}"""


def open_in_lab(page, lab_server, notebook: str, *, figures: int = 1, timeout_ms: int = 120_000):
    """Open `notebook`, listen to its kernel, run all cells, wait for `figures` drawn titles."""
    page.goto(lab_server.lab_url(notebook))
    page.wait_for_function(
        "() => window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell')",
        timeout=60_000,
    )
    page.wait_for_function(KERNEL_ATTACHED, timeout=90_000, polling=10)
    page.evaluate(LISTEN_TO_KERNEL)  # before the widget manager's first message (see _BENIGN)
    page.wait_for_function(KERNEL_READY, timeout=90_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    wait_for_figures(page, figures, timeout_ms=timeout_ms)
    page.wait_for_function(KERNEL_READY, timeout=timeout_ms)  # every cell has run


def wait_for_figures(page, figures: int, *, timeout_ms: int) -> None:
    page.wait_for_function(
        "(n) => document.querySelectorAll('.js-plotly-plot .gtitle').length >= n",
        arg=figures,
        timeout=timeout_ms,
    )


# What every notebook's opening prints, measured on a trace of all kernel messages: JupyterLab's
# widget manager first asks for the kernel's widgets over a `jupyter.widget.control` comm. Before
# the notebook has imported ipywidgets that target is not registered: ipykernel prints the first
# line (caused by the comm_open), closes the comm, and the manager falls back to comm_info (its
# maintainers call the message harmless: jupyter-widgets/ipywidgets#3525). Messages the manager had
# already sent on that comm then get the second line. The listener starts before the kernel is
# idle, so both are heard on every opening instead of on some (CI failed once when the first line
# came in after "idle"); any other stderr still counts.
_BENIGN = re.compile(
    r"^stderr on comm_open: No such comm target registered: jupyter\.widget\.control\s*$"
    r"|^stderr: No such comm: [0-9a-f-]+\s*$"
)


def kernel_errors(page) -> list[str]:
    """Errors and stderr the kernel published since the notebook was opened (but _BENIGN)."""
    errors = page.evaluate("() => window.__itlkitKernelErrors || []")
    return [e for e in errors if not _BENIGN.match(e)]


def cell_errors(page) -> list[str]:
    """Tracebacks shown in the notebook's cells."""
    return page.locator(".jp-OutputArea-output[data-mime-type*='error']").all_text_contents()


def layout_problems(page, *, settle_ms: int = 8_000, figure: int | None = None) -> list[str]:
    """What is wrong with the page's layout once it has had `settle_ms` to settle (or now); with
    `figure`, that figure's problems and the controls' (not the other figures')."""
    try:
        page.wait_for_function(
            f"(only) => ({LAYOUT_PROBLEMS})(only).length === 0", arg=figure, timeout=settle_ms
        )
    except PlaywrightTimeout:
        pass  # the problems still there are the answer
    return page.evaluate(LAYOUT_PROBLEMS, figure)


def problems_of_each_figure_in_view(page) -> list[str]:
    """`layout_problems` of each figure in turn, scrolled into view, as a reader sees them.
    JupyterLab skips laying out the cells out of view (`content-visibility: auto`), and a figure
    there is refitted as it comes into view (the FitFiguresToWidth widget)."""
    problems = []
    plots = page.locator(".js-plotly-plot")
    for i in range(plots.count()):
        plots.nth(i).scroll_into_view_if_needed()
        problems += layout_problems(page, figure=i)
    return problems


def figure_problems(page) -> list[str]:
    """What FIGURE_PROBLEMS finds in every figure on the page."""
    return page.evaluate(FIGURE_PROBLEMS)


def toasts(page, *, wait_ms: int = 2_000) -> list[str]:
    """The toasts JupyterLab shows once it has had `wait_ms` more to show them."""
    page.wait_for_timeout(wait_ms)
    return page.evaluate(TOASTS)


def titles(page) -> list[str]:
    return page.evaluate(TITLES)


def press_and_time(page, selector: str, key: str, *, figure: int = 0, timeout_ms=30_000) -> float:
    """Milliseconds from a key press on `selector` to figure `figure`'s new title."""
    page.locator(selector).first.focus()
    page.evaluate(ARM_REDRAW_TIMER, figure)
    page.keyboard.press(key)
    page.wait_for_function("() => window.__itlkitRedrawMs !== null", timeout=timeout_ms)
    return page.evaluate("() => window.__itlkitRedrawMs")


def without_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
