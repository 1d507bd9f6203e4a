"""metrics.series: a series is its full label set; counters are read per series, then summed.

Each case is written by hand in vLLM's exposition format and its expected increase worked out in
the comment beside it, as Prometheus' `increase()` would count it per series.
"""

from __future__ import annotations

import pytest
from test_sources import HEAD, TPOT_HEAD, _write_series, itl_lines, page

from itlkit.errors import SourceError
from itlkit.metrics.histogram import series_window
from itlkit.metrics.readers import parse_prometheus_text, read_scrape_folder
from itlkit.metrics.series import histogram_series, scalar_series

ITL = "vllm:inter_token_latency_seconds"
TPOT = "vllm:time_per_output_token_seconds"


def _flat(n):
    """n observations, all in the first bucket (le=0.01)."""
    return [n] * 6


def _engines(*per_engine):
    """One page holding engine 0, 1, ... with these counts (all observations <= 10 ms)."""
    blocks = [HEAD]
    for i, n in enumerate(per_engine):
        if n is not None:
            blocks.append(
                itl_lines(ITL, _flat(n), 0.005 * n, labels=f'model_name="m",engine="{i}"')
            )
    return page(*blocks)


def _window(tmp_path, pages):
    _write_series(tmp_path / "s", pages)
    series = histogram_series(read_scrape_folder(tmp_path / "s"), "itl")
    return series, series_window(series)


def test_one_engine_restarting_does_not_swallow_the_others_increase(tmp_path):
    # engine 0: 1,000 -> 1,100 (+100); engine 1: 400 -> 50, a restart (+50 since). True: 150.
    # Summed first, 1,400 -> 1,150 looks like one big reset and reads as +1,150.
    series, w = _window(tmp_path, [_engines(1000, 400), _engines(1100, 50)])
    assert w.histogram.count == 150
    assert w.histogram.sum == pytest.approx(0.005 * 150)
    assert w.counter_reset and w.reset_times_seconds == (series.timestamps_seconds[1],)


def test_both_engines_restart_at_once(tmp_path):
    # 1,000 -> 10 and 400 -> 5: both reset; 15 observations since.
    _, w = _window(tmp_path, [_engines(1000, 400), _engines(10, 5)])
    assert w.histogram.count == 15 and w.counter_reset


def test_engine_that_appears_and_one_that_goes_away(tmp_path):
    # scrape 0: engine 0 at 100. scrape 1: engines 0 (120) and 1 (30, new: all 30 are new).
    # scrape 2: engine 1 gone; engine 0 at 150. Increase: (150 - 100) + 30 = 80, no reset.
    pages = [_engines(100, None), _engines(120, 30), _engines(150, None)]
    series, w = _window(tmp_path, pages)
    assert series.counts.tolist() == [100, 150, 180]
    assert w.histogram.count == 80 and not w.counter_reset


def test_upgrade_from_v0_pages_to_v1_pages_with_a_rename(tmp_path):
    # vLLM 0.9 pages: TPOT without an engine label (40 -> 60). After the upgrade (a restart), V1
    # pages name it ITL with engine="0", counting from zero (5 -> 25). Increase: 20 + 5 + 20 = 45.
    old = [page(TPOT_HEAD, itl_lines(TPOT, _flat(n), 0.005 * n, labels='model_name="m"'))
           for n in (40, 60)]  # fmt: skip
    new = [page(HEAD, itl_lines(ITL, _flat(n), 0.005 * n)) for n in (5, 25)]
    _, w = _window(tmp_path, old + new)
    assert w.histogram.count == 45


def _tpot_v0(n):
    """A vLLM 0.9-style page: the old name, no engine label; n observations <= 10 ms."""
    return page(TPOT_HEAD, itl_lines(TPOT, _flat(n), 0.005 * n, labels='model_name="m"'))


def _itl(n, labels='model_name="m",engine="0"'):
    return page(HEAD, itl_lines(ITL, _flat(n), 0.005 * n, labels=labels))


def test_a_renamed_family_continues_its_series(tmp_path):
    # 1,000 -> 1,100 under the old name, then 1,200 -> 1,300 under the new one (the counter read
    # on: no drop). Increase 300. Read as two series, the new one from zero: 100 + 1,300 = 1,400.
    _, w = _window(tmp_path, [_tpot_v0(1000), _tpot_v0(1100), _itl(1200), _itl(1300)])
    assert w.histogram.count == 300 and not w.counter_reset


def test_a_page_with_both_names_between_the_two_counts_once(tmp_path):
    # 0.9 (old name) -> 0.11 (both names, same values) -> 0.12 (new name): 500 -> 800, +300
    both = page(
        TPOT_HEAD, itl_lines(TPOT, _flat(650), 3.25), HEAD, itl_lines(ITL, _flat(650), 3.25)
    )
    _, w = _window(tmp_path, [_tpot_v0(500), both, _itl(800)])
    assert w.histogram.count == 300


def test_an_engine_label_that_appears_continues_the_unlabelled_series(tmp_path):
    # V0 pages have no engine label (1,000 -> 1,100); V1 pages of the same server say engine="0"
    # (1,150 -> 1,200). Increase 200, not 100 + 1,200.
    pages = [_itl(1000, 'model_name="m"'), _itl(1100, 'model_name="m"'), _itl(1150), _itl(1200)]
    _, w = _window(tmp_path, pages)
    assert w.histogram.count == 200
    # and the engine filter finds engine 0 in the unlabelled pages too
    series = histogram_series(read_scrape_folder(tmp_path / "s"), "itl", engine=0)
    assert series.counts.tolist() == [1000, 1100, 1150, 1200]


def test_an_unlabelled_and_an_engine_0_series_on_one_page_are_refused():
    text = page(HEAD, itl_lines(ITL, _flat(10), 0.05, labels='model_name="m"'),
                itl_lines(ITL, _flat(20), 0.1))  # fmt: skip
    with pytest.raises(SourceError, match=r"both\.prom: .* appears twice in one scrape"):
        histogram_series(parse_prometheus_text(text, source="both.prom"), "itl")


def test_two_pages_of_one_instant_are_refused_naming_both(tmp_path):
    folder = tmp_path / "tz"
    folder.mkdir()
    (folder / "metrics-20261202T150000Z.prom").write_text(_itl(100))
    (folder / "metrics-20261202T160000+01:00.prom").write_text(_itl(200))  # the same instant
    (folder / "metrics-20261202T150100Z.prom").write_text(_itl(300))
    with pytest.raises(SourceError, match=r"T150000Z\.prom and .*T160000\+01:00\.prom are both "
                       r"stamped 2026-12-02T15:00:00Z"):  # fmt: skip
        histogram_series(read_scrape_folder(folder), "itl")


def test_same_series_twice_in_one_page_is_an_error_naming_it():
    text = page(
        HEAD,
        itl_lines(ITL, _flat(10), 0.05),
        itl_lines(ITL, _flat(10), 0.05, labels='engine="0",model_name="m"'),  # same, reordered
    )
    with pytest.raises(SourceError, match=r'twice\.prom: .*engine="0".* appears twice'):
        histogram_series(parse_prometheus_text(text, source="twice.prom"), "itl")


def test_a_repeated_sample_names_the_two_lines_that_hold_it():
    block = [
        'vllm:inter_token_latency_seconds_bucket{le="0.01"} 5',
        'vllm:inter_token_latency_seconds_bucket{le="+Inf"} 10',
        "vllm:inter_token_latency_seconds_count 10",
        "vllm:inter_token_latency_seconds_sum 0.12",
    ]
    text = "\n".join(block + block) + "\n"  # the le="0.01" bucket on lines 1 and 5
    with pytest.raises(SourceError, match=r'le="0.01" appears twice in one scrape \(lines 1, 5\)'):
        histogram_series(parse_prometheus_text(text, source="twice.prom"), "itl")
    text = "\n".join(block + block[3:]) + "\n"  # only the _sum again, on line 5
    with pytest.raises(SourceError, match=r"_sum appears twice in one scrape \(lines 4, 5\)"):
        histogram_series(parse_prometheus_text(text, source="twice.prom"), "itl")


def test_two_models_on_one_page_are_counted_apart():
    text = page(
        HEAD,
        itl_lines(ITL, _flat(10), 0.05, labels='model_name="a",engine="0"'),
        itl_lines(ITL, _flat(30), 0.15, labels='model_name="b",engine="0"'),
    )
    frame = parse_prometheus_text(text, source="two.prom")
    assert histogram_series(frame, "itl", model_name="a").counts.tolist() == [10]
    assert histogram_series(frame, "itl", model_name="b").counts.tolist() == [30]


def test_two_models_without_a_choice_are_listed_not_summed():
    text = page(
        HEAD,
        itl_lines(ITL, _flat(10), 0.05, labels='model_name="a",engine="0"'),
        itl_lines(ITL, _flat(30), 0.15, labels='model_name="b",engine="0"'),
    )
    with pytest.raises(SourceError, match=r"2 models in the input \('a', 'b'\).*--model-name"):
        histogram_series(parse_prometheus_text(text, source="two.prom"), "itl")


def _preemptions(*per_engine):
    lines = ["# TYPE vllm:num_preemptions counter"]
    lines += [
        f'vllm:num_preemptions_total{{model_name="m",engine="{i}"}} {n}'
        for i, n in enumerate(per_engine)
        if n is not None
    ]
    return page(lines)


def test_counters_are_corrected_per_series_too(tmp_path):
    # engine 0: 10 -> 12 -> 15; engine 1: 7 -> 1 (a restart: 7 before, 1 since, so 8) -> gone
    # (holds 8). Summed per scrape: 10 + 7 = 17, 12 + 8 = 20, 15 + 8 = 23.
    _write_series(
        tmp_path / "c", [_preemptions(10, 7), _preemptions(12, 1), _preemptions(15, None)]
    )
    values = scalar_series(read_scrape_folder(tmp_path / "c"), "preemptions")
    assert values.tolist() == [17, 20, 23]


def test_diagnosis_reports_a_restart_that_the_series_corrected():
    # The bundled v0.9 folder: two engines restart before the 9th scrape, at 12:02:00 UTC
    # (data/README.md). The counters carry on across it, and the timeline still says so.
    from itlkit.bundled import bundled_path
    from itlkit.diagnosis.evidence import timeline_from_frame

    folder = bundled_path("synthetic-v0.9-two-engines-restart")
    timeline = timeline_from_frame(read_scrape_folder(folder))
    assert timeline.counter_resets_seconds == (1796212920.0,)  # 2026-12-02T12:02:00Z
    assert any("1 counter reset(s) (server restart) at 12:02:00" in n for n in timeline.notes)
