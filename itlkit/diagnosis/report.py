"""The postmortem as one structure, and its two renderings: text (the CLI) and HTML (the notebook
widget and the offline report).

`build_report` gathers the verdict, the numbers it rests on, every cause's evidence, and for the
named causes what to check next and the priced fixes. `to_text` and `to_html` only lay it out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from itlkit.diagnosis.findings import TITLES, Fix, bucket_text, shape_sentence
from itlkit.diagnosis.scoring import HEALTHY_BELOW, Diagnosis
from itlkit.units import format_percent, format_seconds

HTML_PARTS = ("assumed", "verdict", "facts", "findings", "notes")


@dataclass(frozen=True)
class Section:
    """One cause in the report; `named` causes carry checks and fixes."""

    title: str
    score: float
    named: bool
    evidence: tuple[str, ...]
    checks: tuple[str, ...]
    fixes: tuple[Fix, ...]
    only_on: tuple[str, ...] = ()  # the GPU was not given: the plausible GPUs that name it

    @property
    def actionable(self) -> bool:
        """Whether its checks and fixes are shown: named, or named on some plausible GPUs."""
        return self.named or bool(self.only_on)

    void: bool = False  # the steps beat the deployment's floor: no score means anything

    @property
    def status(self) -> str:
        """What to print after its score: nothing when named."""
        if self.void:
            return "  (not judged: the steps beat this deployment's floor)"
        if self.named:
            return ""
        if self.only_on:
            return f"  (named only on {', '.join(self.only_on)}: pass --gpu)"
        return "  (below threshold)"


@dataclass(frozen=True)
class Report:
    """Everything a postmortem says, in reading order."""

    period: str
    verdict: str
    healthy: bool
    facts: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]
    notes: tuple[str, ...]
    gpu_range: tuple[str, ...] = ()  # when the GPU was not given: does the verdict hang on it?
    assumptions: tuple[str, ...] = ()  # what of the deployment was read off the page or assumed
    impossible: str = ""  # why the judged deployment cannot have made the steps


def gpu_range_lines(d: Diagnosis) -> tuple[str, ...]:
    """When the page did not name its GPU: the GPU the report judges on, then per cause the
    plausible GPUs that name it, the GPUs the steps rule out, and those the weights do not fit."""
    if not d.alternatives:
        return ()
    plausible = d.plausible_gpus
    lines = [
        f"the page does not name its GPU; this report judges {d.deployment.gpu.slug}, one "
        f"of {len(plausible)} plausible: {', '.join(a.gpu for a in plausible) or 'none'}"
    ]
    titles = {f.cause: f.title for f in d.findings}  # in the engine's terms
    for cause in TITLES:
        if cause not in titles:  # the page cannot judge it (`scoring.cause_applies`)
            continue
        title = titles[cause]
        scores = {a.gpu: dict(a.scores)[cause] for a in plausible}
        if not scores:
            break
        named = [gpu for gpu, score in scores.items() if score >= HEALTHY_BELOW]
        where = ("every plausible GPU" if len(named) == len(scores) else
                 ", ".join(named) if named else "no plausible GPU")  # fmt: skip
        low, high = f"{min(scores.values()):.2f}", f"{max(scores.values()):.2f}"
        spread = f"score {low}" if low == high else f"scores {low}-{high}"
        lines.append(f"{title}: named on {where} ({spread})")
    lines += [f"ruled out {a.gpu}: {a.impossible}" for a in d.alternatives
              if a.weights_fit and not a.plausible]  # fmt: skip
    unfit = [a.gpu for a in d.alternatives if not a.weights_fit]
    if unfit:
        lines.append(f"the weights do not fit on {', '.join(unfit)} at this TP: not considered")
    return tuple(lines)


def build_report(d: Diagnosis) -> Report:
    """The diagnosis as a report: period, facts, verdict, one section per cause, notes."""
    t, fp = d.timeline, d.fingerprint
    q = fp.itl_quantiles_seconds
    mbu_low, mbu_high = fp.mbu_range
    period = (
        f"{t.snapshots} scrapes, {len(t)} windows over {t.duration_seconds / 60:.1f} min"
        if t.has_time_axis
        else "one scrape (cumulative since the server started)"
    )
    facts = (
        ("deployment", f"{d.deployment.label}, batch ~{fp.batch_size:.0f}, context "
                       f"~{fp.context_tokens:,.0f} tokens"),
        ("floor", f"{format_seconds(fp.floor_seconds)} (weights + KV at HBM bandwidth)"),
        ("fast mode", f"{format_seconds(fp.fast_mode_seconds)}: MBU fit "
                      f"{format_percent(fp.mbu_fit)} (its bucket allows "
                      f"{100 * mbu_low:.0f}-{100 * mbu_high:.0f}%)"),
        ("ITL", f"p50 {format_seconds(q[0.5])}, p90 {format_seconds(q[0.9])}, p99 "
                f"{format_seconds(q[0.99])} (interpolated in the "
                f"{bucket_text(fp.itl_quantile_buckets[0.99])} bucket), mean "
                f"{format_seconds(t.itl_total.mean)} over {t.itl_total.count:,.0f} observations"),
        ("clusters", shape_sentence(fp)),
    )  # fmt: skip
    sections = tuple(
        Section(f.title, f.score, f in d.named, f.evidence, f.confirm, f.fixes,
                tuple(d.gpus_naming(f.cause)) if f in d.depends_on_gpu else (),
                bool(d.impossible))
        for f in d.ranked
    )  # fmt: skip
    return Report(period, d.verdict_with_range, d.healthy, facts, sections, d.notes,
                  gpu_range_lines(d), d.assumptions, d.impossible)  # fmt: skip


def to_text(report: Report) -> str:
    """The report as a short postmortem a team can paste into its document."""
    lines = [f"ITL postmortem: {report.period}"]
    lines += [f"{label:<12} {value}" for label, value in report.facts]
    lines += ["", f"{'verdict':<12} {report.verdict}"]
    lines += [f"{'GPU range':<12} {g}" if i == 0 else f"{'':<12} {g}"
              for i, g in enumerate(report.gpu_range)]  # fmt: skip
    lines += [""]
    for rank, s in enumerate(report.sections, 1):
        lines.append(f"{rank}. {s.title}: score {s.score:.2f}{s.status}")
        lines += [f"   - {e}" for e in s.evidence]
        if s.actionable:
            lines.append("   check next:")
            lines += [f"   - {c}" for c in s.checks]
            lines.append("   fixes and their price:")
            lines += [f"   - {f.action}: {f.effect}. Price: {f.price}." for f in s.fixes]
        lines.append("")
    if report.notes:
        lines.append("notes")
        lines += [f"- {n}" for n in report.notes]
    return "\n".join(lines).rstrip()


def _items(texts) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in texts) + "</ul>"


def _section_html(s: Section) -> str:
    style = "" if s.actionable else " style='color:#888'"
    parts = [f"<h4{style}>{html.escape(s.title)} — score {s.score:.2f}"
             f"{html.escape(s.status)}</h4>", _items(s.evidence)]  # fmt: skip
    if s.actionable:
        fixes = "".join(
            f"<li><b>{html.escape(f.action)}</b>: {html.escape(f.effect)}. "
            f"<i>Price:</i> {html.escape(f.price)}.</li>"
            for f in s.fixes
        )
        parts += [
            "<b>Check next</b>",
            _items(s.checks),
            f"<b>Fixes and their price</b><ul>{fixes}</ul>",
        ]
    return "".join(parts)


def to_html(report: Report, *, parts: tuple[str, ...] = HTML_PARTS) -> str:
    """The report as an HTML fragment; `parts` picks and orders what is shown."""
    unknown = set(parts) - set(HTML_PARTS)
    if unknown:
        raise ValueError(f"unknown report parts {sorted(unknown)}; valid: {', '.join(HTML_PARTS)}")
    color = "#2a7a2a" if report.healthy else "#a0322a"
    warning = (
        "<div class='itlkit-below-floor' style='border:2px solid #c62828;background:#fdecea;"
        "color:#b71c1c;padding:6px 10px;margin:4px 0'><b>The steps beat the floor:</b> "
        f"{html.escape(report.impossible)}. Pick the deployment that served these metrics.</div>"
        if report.impossible else ""
    )  # fmt: skip
    rendered = {
        "assumed": "".join(
            f"<div class='itlkit-assumed' style='color:#666'>assumed: {html.escape(a)}</div>"
            for a in report.assumptions
        ),
        "verdict": warning + f'<div style="font-size:15px;color:{color}"><b>'
        f"{html.escape(report.verdict)}</b></div>",
        "facts": "<table>"
        + "".join(
            f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in report.facts
        )
        + f"</table><p style='color:#666'>{html.escape(report.period)}</p>",
        "findings": (
            f"<p>{'<br>'.join(html.escape(g) for g in report.gpu_range)}</p>"
            if report.gpu_range
            else ""
        )
        + "".join(_section_html(s) for s in report.sections),
        "notes": f"<div style='color:#666'>Notes{_items(report.notes)}</div>"
        if report.notes
        else "",
    }
    return "".join(rendered[p] for p in parts)
