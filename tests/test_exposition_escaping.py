"""Label values are escaped where pages are written, so a model name cannot forge samples.

`model_name` comes from a user's config.json (`_name_or_path`); written unescaped, the name below
closes its quote and adds a preemption counter of 99,999 to every page.
"""

from __future__ import annotations

import pytest

from itlkit.metrics.exposition import EngineState, escape_label_value, render_vllm_metrics
from itlkit.metrics.readers import parse_prometheus_text
from itlkit.metrics.series import scalar_series

FORGED = 'evil"} 0\nvllm:num_preemptions_total{model_name="evil",engine="0"} 99999\n# x\\'


def test_escaping_follows_the_text_format():
    # Prometheus text format: \ -> \\, " -> \", newline -> \n (in that order).
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


@pytest.mark.parametrize("version", ["0.9", "0.11", "0.12"])
def test_forged_model_name_reads_back_as_one_name_and_no_extra_sample(version):
    state = EngineState(values={"vllm:num_preemptions_total": 3.0})
    text = render_vllm_metrics({"0": state}, model_name=FORGED, version=version)
    frame = parse_prometheus_text(text, source="page.prom")
    assert set(frame["model_name"].unique()) == {FORGED}
    assert scalar_series(frame, "preemptions").tolist() == [3.0]
