"""The notebooks read the page as the CLI does (issue 19, item 3): an uploaded real page is judged
on the deployment `itlkit diagnose` infers from it without flags, with the same "assumed: ..."
lines and the same verdict; a deployment the steps beat is flagged in red."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

import pytest
from _paths import DATA, REAL_PAGES

from itlkit.cli import main
from itlkit.widgets.postmortem import UPLOAD, PostmortemExplorer

OPT = REAL_PAGES / "er0080-opt125m-tp2-3090-loaded-v0.25" / "metrics.prom"
QWEN = REAL_PAGES / "armandos-qwen3-4b-fp8-ngc25.09" / "metrics.prom"
OPT_CONFIG = DATA / "hf_configs" / "opt-125m" / "config.json"


def _text(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _upload(explorer: PostmortemExplorer, page) -> None:
    data = page.read_bytes()
    explorer.source.value = UPLOAD
    explorer.upload.value = ({"name": page.name, "type": "text/plain", "size": len(data),
                              "last_modified": dt.datetime.now(dt.UTC),
                              "content": memoryview(data)},)  # fmt: skip
    explorer.reload()


def _cli(capsys, *args) -> dict:
    assert main(["diagnose", "--json", *map(str, args)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("page", [OPT, QWEN], ids=["opt-125m-tp2", "qwen3-4b-fp8"])
def test_an_uploaded_page_is_judged_as_the_cli_judges_it(page, capsys):
    ex = PostmortemExplorer(scenario="mixed")
    _upload(ex, page)
    doc = _cli(capsys, page)
    d = ex.diagnosis
    assert (d.deployment.model.slug, d.deployment.gpu.slug, d.deployment.tp) == (
        doc["model"], doc["gpu"], doc["tp"])  # fmt: skip
    shown = _text(ex.verdict.value)
    for line in doc["assumptions"]:
        assert f"assumed: {line}" in shown
    assert doc["verdict"] in shown


def test_the_opt_page_is_not_judged_as_llama_on_h100_by_default():
    # the issue: the notebook judged this page as Llama-3.1-8B bf16 on one H100 (0.7x the floor)
    ex = PostmortemExplorer(scenario="mixed")
    _upload(ex, OPT)
    assert ex.diagnosis.deployment.tp == 2  # from the served name 'opt-125m-tp2'
    assert not ex.diagnosis.impossible
    assert "itlkit-below-floor" not in ex.verdict.value


def test_its_own_config_and_gpu_give_the_argued_verdict():
    ex = PostmortemExplorer(scenario="mixed")
    ex.model_path.value, ex.gpu.value = str(OPT_CONFIG), "rtx-3090"
    _upload(ex, OPT)
    assert "Most likely: host overhead between GPU kernels" in _text(ex.verdict.value)


def test_a_deployment_the_steps_beat_is_flagged_in_red():
    ex = PostmortemExplorer(scenario="mixed")
    ex.model.value, ex.gpu.value, ex.tp.value = "llama-3.1-8b", "h100-sxm", 1
    _upload(ex, OPT)
    assert "itlkit-below-floor" in ex.verdict.value and "#c62828" in ex.verdict.value
    shown = _text(ex.verdict.value)
    assert "The steps beat the floor:" in shown and "No cause can be named" in shown
    assert "Most likely" not in shown


def test_the_what_if_says_how_far_its_replay_is_from_what_was_observed():
    # issue 19, item 7: the replay of the current settings missed the observed TTFT p99 and
    # nothing said so; the line and, when poor, a red warning sit under the what-if figure
    ex = PostmortemExplorer(scenario="mixed")
    replay = ex.baseline.replay
    shown = _text(ex.whatif_notes.value)
    assert replay.line in shown
    assert ("itlkit-replay-warning" in ex.whatif_notes.value) == replay.poor
    observed = ex.diagnosis.itl_quantiles_seconds[0.99]
    replayed = ex.baseline.itl_bucket_quantile(0.99)  # both read through the same buckets
    assert replay.itl_p99_relative_error == pytest.approx(replayed / observed - 1, rel=1e-6)


def _upload_to_histogram(explorer, page) -> None:
    text = page.read_text()
    explorer.upload.value = ({"name": page.name, "type": "text/plain", "size": len(text),
                              "last_modified": dt.datetime.now(dt.UTC),
                              "content": memoryview(text.encode())},)  # fmt: skip


@pytest.fixture
def histogram_explorer():
    from itlkit.bundled import bundled_path
    from itlkit.widgets.histogram import HistogramExplorer

    one = bundled_path("synthetic-v0.12-one-page-20261202T120500Z.prom")
    return HistogramExplorer(examples={"one page": one}, batch_size=64, context_tokens=640)


def test_notebook_03_reads_the_uploaded_page_as_the_cli_does(histogram_explorer, capsys):
    ex = histogram_explorer
    _upload_to_histogram(ex, OPT)
    doc = _cli(capsys, OPT)
    title = _text(ex.figure.layout.title.text)
    for line in doc["assumptions"]:
        assert line in title
    assert ex.inferred().deployment.tp == 2  # from 'opt-125m-tp2', as the CLI reads it


def test_notebook_03_takes_a_config_json_and_draws_its_floor(histogram_explorer):
    # the issue: an OPT-125m page was drawn against the Llama 3.1 8B / H100 floor and the
    # notebook had no way to give a config.json. OPT-125m's KV per token: 2 x 12 layers x
    # 12 heads x 64 x 2 B = 36,864 B, halved per GPU at TP 2
    ex = histogram_explorer
    _upload_to_histogram(ex, OPT)
    ex.model_path.value, ex.gpu.value = str(OPT_CONFIG), "rtx-3090"
    dep = ex.inferred().deployment
    assert dep.model.kv_bytes_per_token(dep.kv) == 2 * 12 * 12 * 64 * 2
    floor = next(t for t in ex.figure.data if t.name and "floor" in t.name).x[0]
    weights_per_gpu = 125e6 * 2 / 2  # OPT-125m's ~125 M parameters in bf16, split over TP 2
    kv_per_gpu = 64 * 640 * 36_864 / 2
    # RTX 3090: 936 GB/s; the 0.94 ms
    assert floor == pytest.approx((weights_per_gpu + kv_per_gpu) / 936e9, rel=0.03)
    assert floor == pytest.approx(0.94e-3, abs=0.005e-3)
    assert ex.warning.value == ""


def test_notebook_03_warns_in_red_when_the_gaps_beat_the_floor(histogram_explorer):
    # judged as Llama 3.1 8B bf16 on one H100 at batch 64, context 640: a 6.40 ms floor, while
    # the fastest 95% of the gaps average at most 5.20 ms (see test_truthful_diagnosis)
    ex = histogram_explorer
    _upload_to_histogram(ex, OPT)
    ex.model.value, ex.gpu.value, ex.tp.value = "llama-3.1-8b", "h100-sxm", 1
    assert "itlkit-below-floor" in ex.warning.value and "#c62828" in ex.warning.value
    assert "average at most 5.20 ms" in _text(ex.warning.value)


def test_every_auto_dropdown_shows_its_label():
    # ipywidgets reads a value of None as "nothing selected" and draws a blank box (seen in the
    # Voila screenshot of notebook 03): AUTO must be a real option, shown by its label
    from itlkit.bundled import bundled_path
    from itlkit.widgets._deployment import AUTO
    from itlkit.widgets.histogram import HistogramExplorer

    one = bundled_path("synthetic-v0.12-one-page-20261202T120500Z.prom")
    for ex in (PostmortemExplorer(scenario="mixed"), HistogramExplorer(examples={"one": one})):
        for control in (*ex.picker.controls, ex.tp):
            if hasattr(control, "options"):
                assert control.label == AUTO, control.description
