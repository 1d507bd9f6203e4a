"""Notebook 04's guided postmortem: load metrics (or scan a Prometheus fleet and pick an instance),
read the verdict, replay what-ifs, export."""

from __future__ import annotations

import dataclasses
import html
import os
import tempfile
from pathlib import Path

import ipywidgets as widgets
import plotly.graph_objects as go

from itlkit.bundled import scenario_folder
from itlkit.diagnosis.deployment import (
    PageFacts,
    Stated,
    infer_deployment,
    page_facts,
    served_model_names,
)
from itlkit.diagnosis.evidence import DEFAULT_WINDOW_SECONDS, Timeline, timeline_from_frame
from itlkit.diagnosis.fleet import (
    TABLE_COLUMNS,
    FleetEvidence,
    FleetRow,
    Member,
    _cells,  # one home for the cells `itlkit diagnose --all` prints
    diagnose_fleet,
    fetch_fleet_evidence,
    to_table,
)
from itlkit.diagnosis.gpu_range import diagnose_deployment
from itlkit.diagnosis.report import build_report, to_html
from itlkit.diagnosis.scoring import Diagnosis
from itlkit.diagnosis.whatif import (
    EngineSpeed,
    Prediction,
    Setting,
    calibrate,
    current_setting,
    predict,
)
from itlkit.errors import ConfigError, EvidenceError, SourceError, UnknownNameError
from itlkit.metrics.readers import read_paths
from itlkit.plots.postmortem import (
    postmortem_html,
    timeline_data,
    timeline_figure,
    whatif_spec,
)
from itlkit.widgets._deployment import AUTO_VALUE, auto_options, deployment_picker
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, update_figure, update_traces
from itlkit.widgets._style import BUSY_HTML, busy_label, checkbox, columns, error_banner, labelled

SCENARIO_DIR = scenario_folder()
UPLOAD = "my files (upload below)"
PROMETHEUS = "a Prometheus server (URL below)"
_PROBLEMS = (ConfigError, EvidenceError, SourceError, UnknownNameError, ValueError, OSError)
_LABEL = "240px"  # holds "max_num_batched_tokens (tokens)"
_WIDE = {"description_width": _LABEL}
# a control's box: the label and room for its value (an ipywidgets default of 300 px
# in all leaves the value 90 px, and a row squeezes it further)
_FIELD = "550px"
_SHORT = "390px"  # a number or a short choice
EVERY_INSTANCE = "every instance summed (or pick one, worst first)"
_KEPT_PREDICTIONS = 256  # replays kept per incident: a few kB each


@dataclasses.dataclass(frozen=True)
class FleetScan:
    """One fleet scan: the URL and period it asked, what came back, the ranked verdicts."""

    inputs: tuple[str, str, str]
    evidence: FleetEvidence
    rows: tuple[FleetRow, ...]


def bundled_scenarios() -> list[str]:
    """Names of the bundled incident folders (data/scenarios)."""
    if not SCENARIO_DIR.is_dir():
        return []
    return sorted(p.name for p in SCENARIO_DIR.iterdir() if (p / "scenario.json").is_file())


class PostmortemExplorer:
    """Load metrics, diagnose, show the evidence, replay what-ifs and export an HTML report."""

    def __init__(self, *, scenario: str = "mixed", max_num_batched_tokens: int = 2048):
        self._source_controls(scenario, max_num_batched_tokens)
        self._fleet_controls()
        self._whatif_controls()
        self.diagnosis: Diagnosis | None = None
        self.speed: EngineSpeed | None = None
        self.baseline: Prediction | None = None
        self.prediction: Prediction | None = None
        # the loaded incident's replays by setting: the baseline does not move with the sliders,
        # and a slider moved back returns to a setting already replayed (same numbers: one seed)
        self._predictions: dict[Setting, Prediction] = {}
        self._run_diagnosis()
        self._shown = self._source_name()
        self.timeline_figure = figure_widget(timeline_figure(self.diagnosis))
        self._run_whatif()
        self.whatif_figure = figure_widget(
            go.Figure(whatif_spec(self.diagnosis, self.baseline, self.prediction))
        )
        if self.prediction is not None:
            self.whatif_notes.value = whatif_notes_html(self.baseline, self.prediction)
        self.load.on_click(lambda _: self.reload())
        self.scan.on_click(lambda _: self.scan_fleet())
        self.instance.observe(self._on_instance, names="value")
        for control in (self.url, self.start, self.end):
            control.observe(self._on_period, names="value")
        self.source.observe(self._show_fleet_controls, names="value")
        for control in (self.whatif_budget, self.whatif_seqs, self.whatif_fp8, self.whatif_disagg,
                        self.whatif_mixed):  # fmt: skip
            control.observe(self.update_whatif, names="value")
        self.export.on_click(lambda _: self.export_report())
        self.view = self._layout()

    def _source_controls(self, scenario: str, max_num_batched_tokens: int) -> None:
        """Where the metrics come from, the deployment that served them, the verdict panes."""
        self.source = widgets.Dropdown(
            options=[*bundled_scenarios(), UPLOAD, PROMETHEUS],
            value=scenario,
            description="incident metrics",
            style=_WIDE,
            layout=widgets.Layout(width=_FIELD),
        )
        self.upload = widgets.FileUpload(
            accept=".prom,.txt,.metrics,.json", multiple=True, description="scrapes"
        )
        self.url = labelled(widgets.Text, "Prometheus URL", placeholder="http://127.0.0.1:9090",
                            width=_FIELD, label_width=_LABEL)  # fmt: skip
        self.start = labelled(widgets.Text, "start", placeholder="2026-12-02T15:00:00Z",
                              width=_FIELD, label_width=_LABEL)  # fmt: skip
        self.end = labelled(widgets.Text, "end", placeholder="2026-12-02T16:00:00Z",
                            width=_FIELD, label_width=_LABEL)  # fmt: skip
        self.picker = deployment_picker(label_width=_WIDE["description_width"], width=_FIELD,
                                        auto=True)  # fmt: skip
        self.model, self.model_path = self.picker.model, self.picker.model_path
        self.gpu, self.weights, self.kv = self.picker.gpu, self.picker.weights, self.picker.kv
        self.tp = widgets.Dropdown(
            options=auto_options((1, 2, 4, 8)), value=AUTO_VALUE,
            description="TP (GPUs)", style=_WIDE, layout=widgets.Layout(width=_FIELD),
        )  # fmt: skip
        self.budget = widgets.BoundedIntText(
            value=max_num_batched_tokens,
            min=16,
            max=65536,
            description="max_num_batched_tokens (tokens)",
            style=_WIDE,
            layout=widgets.Layout(width=_SHORT),
        )
        self.load = widgets.Button(description="load and diagnose", button_style="primary")
        self.busy = busy_label()
        self.verdict, self.evidence = widgets.HTML(), widgets.HTML()

    def _fleet_controls(self) -> None:
        """The fleet scan, offered when the metrics come from Prometheus."""
        self.fleet: FleetScan | None = None
        self._picking = False  # options set by the scan, not a reader's pick
        self.scan = widgets.Button(
            description="scan fleet", icon="search", tooltip="diagnose every instance in the period"
        )
        self.fleet_status, self.fleet_table = widgets.HTML(), widgets.HTML()
        self.instance = widgets.Dropdown(
            options=[(EVERY_INSTANCE, None)], value=None, description="instance", disabled=True,
            style=_WIDE, layout=widgets.Layout(width="720px"),
        )  # fmt: skip
        self.fleet_box = widgets.VBox([self.fleet_status, self.fleet_table, self.instance])
        self._show_fleet_controls()

    def _whatif_controls(self) -> None:
        """The what-if settings and the export button."""
        self.whatif_budget = widgets.IntSlider(
            value=512,
            min=64,
            max=16384,
            step=64,
            description="token budget (tokens/step)",
            continuous_update=False,
            style=_WIDE,
            layout=widgets.Layout(width="590px"),
        )
        self.whatif_budget.add_class("itlkit-whatif-budget")
        self.whatif_seqs = widgets.IntSlider(
            value=1024,
            min=1,
            max=1024,
            description="max_num_seqs (requests)",
            continuous_update=False,
            style=_WIDE,
            layout=widgets.Layout(width="590px"),
        )
        self.whatif_fp8 = checkbox("FP8 KV cache")
        self.whatif_disagg = checkbox("disaggregate prefill")
        # shown for SGLang's metrics only: its default runs prefill batches alone
        self.whatif_mixed = checkbox("mixed chunks (SGLang --enable-mixed-chunk)")
        self.export = widgets.Button(
            description="export HTML report", icon="download", layout=widgets.Layout(width="200px")
        )
        self.export_status = widgets.HTML()
        self.whatif_busy = busy_label()
        self.whatif_notes = widgets.HTML()  # how far the replay is from what was observed

    def _layout(self) -> widgets.VBox:
        """The walk's four sections, each a view of its own for notebook 04's four headed cells
        (`evidence_view`, `verdict_view`, `whatif_view`, `report_view`); `view` stacks them."""
        sources = widgets.VBox([self.source, self.upload, self.url, self.start, self.end])
        deployment = widgets.VBox([*self.picker.controls, self.tp, self.budget])
        self.evidence_view = widgets.VBox([
            widgets.HTML("<h4>The incident's metrics and the deployment that served them</h4>"),
            columns(sources, deployment),
            widgets.HBox([self.load, self.scan, self.busy]),
            self.fleet_box,
            widgets.HTML("<h4>The histogram over time, against arrivals</h4>"),
            self.timeline_figure,
            FitFiguresToWidth(),
        ])  # fmt: skip
        self.verdict.add_class("itlkit-verdict")
        self.verdict_view = widgets.VBox([
            self.verdict,
            widgets.HTML("<h4>Evidence, what to check next, fixes</h4>"),
            self.evidence,
        ])  # fmt: skip
        whatif = columns(
            widgets.VBox([self.whatif_budget, self.whatif_seqs]),
            widgets.VBox([self.whatif_fp8, self.whatif_disagg, self.whatif_mixed]),
        )
        self.whatif_view = widgets.VBox(
            [whatif, self.whatif_busy, self.whatif_figure, self.whatif_notes, FitFiguresToWidth()]
        )
        self.report_view = widgets.HBox([self.export, self.export_status])
        headed = [
            ("1 · The evidence", self.evidence_view), ("2 · The verdict", self.verdict_view),
            ("3 · What if", self.whatif_view), ("4 · The report", self.report_view),
        ]  # fmt: skip
        return widgets.VBox(
            [part for title, view in headed for part in (widgets.HTML(f"<h3>{title}</h3>"), view)]
        )

    # ---- steps ------------------------------------------------------------------------------
    def _frame(self) -> tuple[object, PageFacts]:
        """The tidy metrics of the chosen source and what its pages say of the deployment;
        uploads live in a private folder while read."""
        if self.source.value != UPLOAD:
            paths = [SCENARIO_DIR / self.source.value]
            frame = read_paths(paths)
            return frame, page_facts(served_model_names(frame), paths)
        if not self.upload.value:
            raise ValueError("upload one or more scrape files first")
        with tempfile.TemporaryDirectory(prefix="itlkit-upload-") as folder:  # mode 0700
            paths = [_save_upload(Path(folder), item) for item in self.upload.value]
            frame = read_paths([Path(folder)] if len(paths) > 1 else paths)
            return frame, page_facts(served_model_names(frame), paths)

    def _stated(self) -> Stated:
        """What the controls state; AUTO parts are left to the metrics."""
        return self.picker.stated(tp=self.tp.value)

    def _run_diagnosis(self) -> None:
        if self.source.value == PROMETHEUS:
            timeline, facts = self._prometheus_evidence()
        else:
            frame, facts = self._frame()
            timeline = timeline_from_frame(frame)
        inferred = infer_deployment(self._stated(), facts)
        self.diagnosis = diagnose_deployment(
            timeline, inferred, max_num_batched_tokens=int(self.budget.value)
        )
        self.speed = None  # the replay is calibrated again for new metrics
        self._predictions = {}
        sglang = self.diagnosis.timeline.engine == "sglang"
        self.whatif_mixed.layout.display = "" if sglang else "none"
        report = build_report(self.diagnosis)
        self.verdict.value = to_html(report, parts=("assumed", "verdict", "facts", "notes"))
        self.evidence.value = to_html(report, parts=("findings",))

    def _prometheus_evidence(self) -> tuple[Timeline, PageFacts]:
        """The picked fleet member's windows, or the server's only model over the period."""
        from itlkit.diagnosis.evidence import timeline_from_prometheus

        url, start, end = self._prometheus_inputs()
        if self.instance.value is not None:
            member = self.instance.value
            served = (member.model_name,) if member.model_name else ()
            return self._member_timeline(member), PageFacts(served)
        return timeline_from_prometheus(url, start=start, end=end), PageFacts()

    def _prometheus_inputs(self) -> tuple[str, str, str]:
        """URL, start and end as typed; one sentence naming every one still missing."""
        url, start, end = (w.value.strip() for w in (self.url, self.start, self.end))
        needs = [] if url else [f"its URL (e.g. {self.url.placeholder})"]
        times = [(name, w) for name, w, v in (("the start", self.start, start),
                                              ("the end", self.end, end)) if not v]  # fmt: skip
        if times:
            needs.append(" and ".join(name for name, _ in times)
                         + f" of the incident (e.g. {times[0][1].placeholder})")  # fmt: skip
        if needs:
            raise ValueError("Prometheus needs " + ", ".join(needs))
        return url, start, end

    def _member_timeline(self, member: Member) -> Timeline:
        """The picked instance's windows, cut from the scan's aggregated answers (the single-
        instance queries take no instance selector)."""
        timeline = self.fleet.evidence.timelines[member]
        if timeline is None:
            raise EvidenceError(f"{member.instance}: its ITL histogram counted nothing in the "
                                "period (no traffic)")  # fmt: skip
        return timeline

    # ---- the fleet scan ---------------------------------------------------------------------
    def scan_fleet(self) -> None:
        """Diagnose every instance of the Prometheus server over the period, as `itlkit diagnose
        --prometheus URL --start --end --all` does; show the ranked table and offer each one."""
        self._set_busy(True)
        try:
            try:
                self.fleet = self._run_fleet_scan()
            except _PROBLEMS as exc:
                self._forget_fleet(error_banner("Cannot scan the fleet:", _one_line(exc)))
                return
            self._offer_instances()
        finally:
            self._set_busy(False)

    def _run_fleet_scan(self) -> FleetScan:
        """The scan's evidence and verdicts, every instance judged on the deployment above."""
        inputs = self._prometheus_inputs()
        url, start, end = inputs
        stated = self._stated()
        evidence = fetch_fleet_evidence(
            url, start=start, end=end, window_seconds=DEFAULT_WINDOW_SECONDS
        )

        def deployment_for(name: str):
            return infer_deployment(stated, PageFacts((name,) if name else ()))

        rows = diagnose_fleet(evidence, deployment_for,
                              max_num_batched_tokens=int(self.budget.value))  # fmt: skip
        if not rows:
            raise EvidenceError(f"{url}: no vLLM metrics in that period")
        return FleetScan(inputs, evidence, rows)

    def _offer_instances(self) -> None:
        scan = self.fleet
        summary = to_table(scan.rows, window_seconds=scan.evidence.window_seconds).splitlines()[-1]
        said = sorted({a for r in scan.rows for a in r.assumptions})
        self.fleet_status.value = html.escape(summary) + "".join(
            f"<br><span class='itlkit-assumed'>assumed: {html.escape(a)}</span>" for a in said
        )
        self.fleet_table.value = fleet_table_html(scan.rows)
        options = [(EVERY_INSTANCE, None), *((_member_label(r), r.member) for r in scan.rows)]
        self._set_instances(options)

    def _forget_fleet(self, status: str) -> None:
        """No scan on show (it failed, or it was of another URL or period)."""
        self.fleet = None
        self.fleet_status.value, self.fleet_table.value = status, ""
        self._set_instances([(EVERY_INSTANCE, None)])

    def _set_instances(self, options) -> None:
        self._picking = True
        try:
            self.instance.options, self.instance.value = options, None
            self.instance.disabled = len(options) == 1
        finally:
            self._picking = False

    def _on_instance(self, change) -> None:
        if not self._picking:
            self.reload()

    def _on_period(self, change) -> None:
        if self.fleet is not None and self.fleet.inputs != tuple(
            w.value.strip() for w in (self.url, self.start, self.end)
        ):
            self._forget_fleet("the URL or period changed: scan the fleet again")

    def _show_fleet_controls(self, change=None) -> None:
        shown = "" if self.source.value == PROMETHEUS else "none"
        self.scan.layout.display = self.fleet_box.layout.display = shown

    def _setting(self) -> Setting:
        base = current_setting(self.diagnosis)
        return dataclasses.replace(
            base,
            max_num_batched_tokens=int(self.whatif_budget.value),
            max_num_seqs=int(self.whatif_seqs.value),
            kv_precision="fp8" if self.whatif_fp8.value else base.kv_precision,
            disaggregated=bool(self.whatif_disagg.value),
            prefill_alone=base.prefill_alone and not self.whatif_mixed.value,
        )

    def _run_whatif(self) -> None:
        if not self.diagnosis.timeline.has_time_axis:
            self.baseline = self.prediction = None
            return
        if self.speed is None:
            self.speed = calibrate(self.diagnosis)
        self.baseline = self._predict(current_setting(self.diagnosis))
        self.prediction = self._predict(self._setting())

    def _predict(self, setting: Setting) -> Prediction:
        """The loaded incident replayed under `setting`, simulated once per incident (each
        replay of a slider move costs 100-400 ms)."""
        if setting not in self._predictions:
            if len(self._predictions) >= _KEPT_PREDICTIONS:  # the oldest goes
                del self._predictions[next(iter(self._predictions))]
            self._predictions[setting] = predict(self.diagnosis, setting, speed=self.speed)
        return self._predictions[setting]

    def reload(self) -> None:
        """Load the chosen metrics, diagnose and redraw everything (errors shown, not raised)."""
        self._set_busy(True)  # sent to the page before the work starts: the reader sees the wait
        try:
            try:
                self._run_diagnosis()
            except _PROBLEMS as exc:
                self.verdict.value = error_banner("Cannot diagnose:", str(exc))
                for fig in (self.timeline_figure, self.whatif_figure):
                    _mark_stale(fig, f"not updated (cannot diagnose): still {self._shown}")
                return
            self._shown = self._source_name()
            fresh = timeline_figure(self.diagnosis)  # its notes and axes follow the new metrics
            with self.timeline_figure.batch_update():
                update_traces(self.timeline_figure, timeline_data(self.diagnosis))
                self.timeline_figure.layout.update(fresh.layout.to_plotly_json(), overwrite=True)
                self.timeline_figure.layout.annotations = fresh.layout.annotations
            self.update_whatif()
        finally:
            self._set_busy(False)

    def update_whatif(self, change=None) -> None:
        """Re-simulate with the what-if controls and redraw the overlay; a setting replayed
        before is redrawn at once, without the signs of a wait (each costs the page a redraw)."""
        if self._replayed():
            self._redraw_whatif(announce=False)
            return
        self._set_busy(True)
        try:
            self._redraw_whatif()
        finally:
            self._set_busy(False)

    def _replayed(self) -> bool:
        """Whether the what-if controls' setting and the baseline are replayed already."""
        try:
            wanted = {self._setting(), current_setting(self.diagnosis)}
        except _PROBLEMS:
            return False
        return self.speed is not None and wanted <= self._predictions.keys()

    def _redraw_whatif(self, *, announce: bool = True) -> None:
        # no old numbers under the new setting's name
        if announce and self.diagnosis.timeline.has_time_axis:
            try:
                label = self._setting().label
            except _PROBLEMS:
                label = "new setting"
            self.whatif_figure.layout.title.text = f"what-if ({label}): recomputing…"
        try:
            self._run_whatif()
        except _PROBLEMS as exc:
            self._clear_whatif(f"what-if unavailable: {exc}")
            return
        if self.prediction is None:
            self._clear_whatif(
                "what-if needs a scrape series (a time axis); one scrape cannot be replayed"
            )
            return
        spec = whatif_spec(self.diagnosis, self.baseline, self.prediction)
        with self.whatif_figure.batch_update():  # the curves, title and ranges that changed
            update_figure(self.whatif_figure, spec)
        self.whatif_notes.value = whatif_notes_html(self.baseline, self.prediction)

    def _clear_whatif(self, title: str) -> None:
        """No curves (they belonged to another setting or incident), and `title` saying why."""
        self.whatif_notes.value = ""
        with self.whatif_figure.batch_update():
            update_traces(self.whatif_figure, ({"x": [], "y": []} for _ in self.whatif_figure.data))
            self.whatif_figure.layout.title.text = title

    def _set_busy(self, busy: bool) -> None:
        for label in (self.busy, self.whatif_busy):
            label.value = BUSY_HTML if busy else ""

    def _source_name(self) -> str:
        """The loaded source in words, for a figure left showing it."""
        if self.source.value == UPLOAD:
            return "your uploaded files"
        if self.source.value == PROMETHEUS:
            where = f"Prometheus at {self.url.value.strip()}"
            picked = self.instance.value
            return where if picked is None else f"{picked.instance} from {where}"
        return str(self.source.value)

    def export_report(self, path: str | Path | None = None) -> Path:
        """Write the self-contained HTML report; returns its path."""
        figures = [go.Figure(self.timeline_figure)]
        if self.prediction is not None:
            figures.append(go.Figure(self.whatif_figure))
        page = postmortem_html(self.diagnosis, figures)
        if path:
            target = Path(path)
            target.write_text(page)
        else:  # a fresh private folder: nothing planted in the shared temp folder is followed
            target = Path(tempfile.mkdtemp(prefix="itlkit-report-")) / "itlkit-postmortem.html"
            _write_new_file(target, page)
        size = f"{target.stat().st_size / 1e6:.1f} MB"
        link = (f"<a class='itlkit-report-link' href='{html.escape(target.name)}' download>"
                f"{html.escape(target.name)}</a>" if not target.is_absolute() else
                f"<code class='itlkit-report-link'>{html.escape(str(target))}</code>")  # fmt: skip
        self.export_status.value = f"wrote {link} ({size}, opens offline)"
        return target


def whatif_notes_html(baseline: Prediction, prediction: Prediction) -> str:
    """The replay's distance from what was observed (its warning in red when poor), then the
    prediction's own notes."""
    parts = []
    replay = baseline.replay
    if replay is not None:
        parts.append(f"<div class='itlkit-replay' style='color:#555'>{html.escape(replay.line)}"
                     "</div>")  # fmt: skip
        if replay.warning:
            parts.append("<div class='itlkit-replay-warning' style='color:#b71c1c'><b>"
                         f"{html.escape(replay.warning)}</b></div>")  # fmt: skip
    parts += [f"<div style='color:#555'>{html.escape(n)}</div>" for n in prediction.notes]
    return "".join(parts)


def fleet_table_html(rows) -> str:
    """The ranked fleet as an HTML table, the cells `itlkit diagnose --all` prints."""
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html.escape(c)}</th>"
                   for c in TABLE_COLUMNS)  # fmt: skip
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:2px 8px'>{html.escape(c)}</td>" for c in _cells(r))
        + "</tr>"
        for r in rows
    )  # fmt: skip
    return (
        f"<table class='itlkit-fleet'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _member_label(row: FleetRow) -> str:
    m = row.member
    return f"{m.instance} · {m.model_name or '-'} · engine {m.engine or '-'}: {row.verdict}"


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _mark_stale(fig: go.FigureWidget, mark: str) -> None:
    """Put `mark` on the first line of `fig`'s title, above the title it keeps (once)."""
    title = fig.layout.title.text or ""
    if title.startswith("not updated"):
        title = title.split("<br>", 1)[1] if "<br>" in title else ""
    fig.layout.title.text = f"{mark}<br>{title}" if title else mark


def _save_upload(folder: Path, item) -> Path:
    """Write one uploaded file into `folder` under its own base name (no path tricks)."""
    name = os.path.basename(str(item["name"]).replace("\\", "/"))
    if name in ("", ".", ".."):
        raise ValueError(f"uploaded file name {item['name']!r} is not a file name")
    target = folder / name
    _write_new_file(target, bytes(item["content"]))
    return target


def _write_new_file(path: Path, content: str | bytes) -> None:
    """Create `path` (never an existing file, never through a symlink), private to the user."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as out:
        out.write(data)
