"""One report structure, two renderings: text and HTML say the same things."""

import html
import json

import pytest

from itlkit.bundled import scenario_folder
from itlkit.diagnosis.evidence import timeline_from_frame
from itlkit.diagnosis.report import build_report, to_html, to_text
from itlkit.diagnosis.scoring import diagnose
from itlkit.metrics.readers import read_scrape_folder
from itlkit.physics.roofline import Deployment

SCENARIO_DIR = scenario_folder()
# `itlkit diagnose --json` keys, as the CLI printed them before the diagnosis was split in layers.
JSON_KEYS = {
    "model", "gpu", "tp", "batch_size", "context_tokens", "floor_seconds", "fast_mode_seconds",
    "mbu_fit", "mbu_range", "expected_mixed_step_seconds", "max_num_batched_tokens", "itl",
    "windows", "duration_seconds", "healthy", "healthy_below", "verdict", "causes", "notes",
    # issue 11: the clusters, the step they imply, a healthy host's cost, the GPU range
    "clusters", "step_seconds", "healthy_host_seconds", "gpu_range",
    # issue 19: why the deployment cannot have made the steps (null when it can)
    "impossible",
}  # fmt: skip
ITL_KEYS = {
    "count", "mean_seconds", "p50_seconds", "p90_seconds", "p99_seconds", "p99_bucket_seconds",
    "slow_share", "slow_cut_seconds",
}  # fmt: skip


def _diagnosed(scenario: str):
    folder = SCENARIO_DIR / scenario
    meta = json.loads((folder / "scenario.json").read_text())
    return diagnose(
        timeline_from_frame(read_scrape_folder(folder)),
        Deployment.create(model=meta["model"], gpu=meta["gpu"]),
        max_num_batched_tokens=meta["max_num_batched_tokens"],
    )


@pytest.fixture(scope="module", params=["mixed", "healthy"])
def result(request):
    return _diagnosed(request.param)


def test_text_and_html_carry_the_same_report(result):
    report = build_report(result)
    text, page = to_text(report), html.unescape(to_html(report))
    for rendered in (text, page):
        assert report.verdict in rendered
        for label, value in report.facts:
            assert value in rendered, label
        for section in report.sections:
            assert section.title in rendered
            assert all(e in rendered for e in section.evidence)
            for fix in section.fixes:
                assert (fix.effect in rendered) == section.named
        assert all(n in rendered for n in report.notes)


def test_only_named_causes_carry_checks_and_fixes(result):
    report = build_report(result)
    assert [s.named for s in report.sections] == [f.score >= 0.5 for f in result.findings]
    assert ("Fixes and their price" in to_html(report)) == any(s.named for s in report.sections)


def test_html_parts_pick_what_is_shown(result):
    report = build_report(result)
    head = to_html(report, parts=("verdict",))
    assert html.escape(report.verdict) in head and "Check next" not in head
    with pytest.raises(ValueError, match="valid: assumed, verdict, facts, findings, notes"):
        to_html(report, parts=("verdict", "figures"))


def test_json_keys_are_unchanged(result):
    out = result.to_json()
    assert set(out) == JSON_KEYS
    assert set(out["itl"]) == ITL_KEYS
    assert set(out["causes"][0]) == {
        "cause", "title", "score", "named", "evidence", "confirm", "fixes"}  # fmt: skip


def test_a_step_below_the_slowest_gpu_time_leaves_no_host_time_and_no_negative_multiple():
    """The healthy scenario's step (~12.8 ms at batch 24) is below its slowest plausible GPU
    time (7.91 ms floor / 0.35 = 22.6 ms): nothing is left for the host, said in words."""
    found = _diagnosed("healthy")
    fp = found.fingerprint
    assert fp.step_seconds < fp.floor_seconds / 0.35
    host = next(f for f in found.findings if f.cause == "host_overhead")
    room = next(e for e in host.evidence if "slowest plausible GPU time" in e)
    assert "less than" in room and "no time is left over for host overhead" in room
    assert "-" not in room.split(":")[-1].split("(")[0]  # no "-14.6x the ..." multiple
