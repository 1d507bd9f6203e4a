"""Notebook 01's wiring, driven from Python: move a control, read the figure."""

import pytest
from _reference import CHUNK_2048_MS, ms_text

from itlkit.physics.roofline import Deployment, decode_step, mixed_step
from itlkit.plots.decode import trace_data
from itlkit.widgets._figure import changes, plain
from itlkit.widgets.decode import DecodeExplorer


@pytest.fixture(scope="module")
def explorer():
    return DecodeExplorer()


def _bar(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_initial_figure_is_the_worked_example(explorer):
    fig = explorer.figure
    assert "floor 15.05 ms" in fig.layout.title.text
    assert f"with 2048-token chunk {ms_text(CHUNK_2048_MS)}" in fig.layout.title.text
    weights, kv = _bar(fig, "weights / GEMMs"), _bar(fig, "KV read")
    assert weights.y[0] == pytest.approx(4.794, abs=1e-3)  # ms, decode bar
    assert kv.y[0] == pytest.approx(10.257, abs=1e-3)
    assert weights.y[1] == pytest.approx(68.57, abs=0.01)  # GEMMs of the chunked step


def test_batch_slider_moves_every_panel(explorer):
    explorer.batch.value = 128
    fig = explorer.figure
    assert "batch 128" in fig.layout.title.text
    assert _bar(fig, "KV read").y[0] == pytest.approx(20.51, abs=0.01)
    marker = next(t for t in fig.data if t.name == "this batch")
    assert list(marker.x) == [128, 128]
    # 128 sequences at 4K need 68.7 GB of KV: more than the 55.9 GB left on an 80 GB H100.
    assert "DOES NOT FIT IN MEMORY" in fig.layout.title.text
    assert "Does not fit in GPU memory" in explorer.status.value
    explorer.batch.value = 64
    assert "DOES NOT FIT" not in fig.layout.title.text


def test_kv_precision_halves_the_kv_segment(explorer):
    explorer.kv.value = "fp8"
    assert _bar(explorer.figure, "KV read").y[0] == pytest.approx(5.128, abs=1e-3)
    explorer.kv.value = "bf16"


def test_chunk_slider_sets_the_slow_step(explorer):
    explorer.chunk.value = 512
    expected = mixed_step(
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=64,
        context_tokens=4096,
        chunk_tokens=512,
    ).step_seconds
    assert f"with 512-token chunk {expected * 1e3:.2f} ms" in explorer.figure.layout.title.text
    assert round(expected * 1e3) == 29
    explorer.chunk.value = 2048


def test_model_gpu_tp_and_mfu_controls(explorer):
    explorer.model.value = "llama-3.1-70b"
    explorer.tp.value = 4
    dep = Deployment.create(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    floor = decode_step(dep, batch_size=64, context_tokens=4096).floor_seconds
    assert f"floor {floor * 1e3:.2f} ms" in explorer.figure.layout.title.text
    explorer.gpu.value = "h200-sxm"
    assert "h200-sxm x4" in explorer.figure.layout.title.text
    explorer.mfu.value = 0.25
    gemms = _bar(explorer.figure, "weights / GEMMs").y[1]
    dep = Deployment.create(model="llama-3.1-70b", gpu="h200-sxm", tp=4, mfu=0.25)
    expected = mixed_step(dep, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    assert gemms == pytest.approx(expected.gemm_seconds * 1e3)
    explorer.model.value, explorer.tp.value = "llama-3.1-8b", 1
    explorer.gpu.value, explorer.mfu.value = "h100-sxm", 0.5


def test_impossible_tp_shows_an_error_and_keeps_the_plot(explorer):
    explorer.model.value = "qwen2.5-7b"  # 28 heads
    before = list(_bar(explorer.figure, "KV read").y)
    explorer.tp.value = 8
    assert "Cannot run" in explorer.status.value
    assert "TP=8 does not divide the 28 attention heads" in explorer.status.value
    assert list(_bar(explorer.figure, "KV read").y) == before
    explorer.tp.value = 1
    assert "Cannot run" not in explorer.status.value
    explorer.model.value = "llama-3.1-8b"


def test_optional_terms_toggle(explorer):
    explorer.host_overhead.value = 3.0  # ms
    assert _bar(explorer.figure, "host overhead").y[0] == pytest.approx(3.0)
    explorer.host_overhead.value = 0.0
    explorer.exclude_embedding.value = True
    assert "floor 14.74 ms" in explorer.figure.layout.title.text
    explorer.exclude_embedding.value = False


def test_own_config_path(explorer, tmp_path):
    explorer.model_path.value = str(tmp_path / "missing.json")
    assert "no such model config.json file" in explorer.status.value
    explorer.model_path.value = ""
    assert "floor 15.05 ms" in explorer.figure.layout.title.text


def test_moving_the_batch_survives_the_browsers_echo(explorer):
    """The batch axis is a numpy array: held as one, plotly's widget protocol raised on echo."""
    from _frontend import echo_trace_deltas

    explorer.batch.value = 65
    echo_trace_deltas(explorer.figure)
    explorer.batch.value = 64
    echo_trace_deltas(explorer.figure)


def test_large_batch_names_the_floor_and_the_compute_bound_step_apart(explorer):
    """Issue 12: at batch 1,024 the title said "floor 168.90 ms" while the line called the floor
    drew the 197 ms compute-bound decode step; each number now has its own name."""
    explorer.batch.value = 1024
    try:
        dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
        step = decode_step(dep, batch_size=1024, context_tokens=4096)
        floor_ms, step_ms = step.floor_seconds * 1e3, step.step_seconds * 1e3
        assert step_ms > floor_ms * 1.1  # the GEMMs at 1,024 tokens are past the ridge
        title = explorer.figure.layout.title.text
        assert f"floor {floor_ms:.2f} ms" in title
        assert f"decode step {step_ms:.2f} ms (compute-bound)" in title
        floor_line = _bar(explorer.figure, "bandwidth floor")
        step_line = _bar(explorer.figure, "decode step")
        assert floor_line.y[-1] == pytest.approx(floor_ms) and floor_line.x[-1] == 1024
        assert step_line.y[-1] == pytest.approx(step_ms)
        assert "decode step (compute-bound)" in explorer.status.value
    finally:
        explorer.batch.value = 64
    assert "compute-bound)" not in explorer.figure.layout.title.text  # batch 64: at the floor


def test_gemm_labels_sit_on_opposite_sides(explorer):
    gemms = _bar(explorer.figure, "this step's GEMMs")
    sides = [position.split()[1] for position in gemms.textposition]
    assert sides == ["left", "right"]  # "decode" and "with chunk" never print on each other


def test_chunk_zero_is_no_chunk(explorer):
    explorer.chunk.value = 0
    try:
        fig = explorer.figure
        assert list(_bar(fig, "KV read").x) == ["decode step", "no prefill chunk"]
        assert list(_bar(fig, "this step's GEMMs").text) == ["decode"]  # one point, one label
        assert "0-token" not in explorer.status.value and "0-token" not in fig.layout.title.text
        # the bars' level tick labels follow the chunk: one per bar, on the bar's category
        assert list(fig.layout.xaxis.tickvals) == ["decode step", "no prefill chunk"]
        assert list(fig.layout.xaxis.ticktext) == ["decode<br>step", "no prefill<br>chunk"]
        explorer.chunk.value = 512
        assert list(fig.layout.xaxis.tickvals) == list(_bar(fig, "KV read").x)
        assert list(fig.layout.xaxis.ticktext) == ["decode<br>step", "+512<br>chunk"]
        assert fig.layout.xaxis.tickangle == 0
    finally:
        explorer.chunk.value = 2048
    assert list(_bar(explorer.figure, "this step's GEMMs").text) == ["decode", "with chunk"]


def test_changes_are_what_the_figure_lacks():
    held = {"x": [1, 2], "line": {"color": "red", "dash": "dot"}, "uid": "a"}
    assert list(changes(held, {"x": [1, 2], "line": {"color": "red", "dash": "dot"}})) == []
    wanted = {"x": [1, 3], "line": {"color": "blue"}, "name": "n"}
    # a nested property left out is removed (as update(overwrite=True) would); a top-level
    # one (the uid) is kept
    assert sorted(changes(held, wanted), key=str) == sorted(
        [("x", [1, 3]), ("line.color", "blue"), ("line.dash", None), ("name", "n")], key=str
    )
    assert list(changes({}, {"annotations": []})) == []  # no annotations either way


def test_a_batch_move_hands_plotly_only_the_traces_it_changes():
    """Issue 12: plotly validated every curve on every key press (12 ms of a 14 ms redraw)."""
    ex = DecodeExplorer()
    before = [plain(values) for values in trace_data(ex._view)]
    ex.batch.value = 128
    after = [plain(values) for values in trace_data(ex._view)]
    moved = {t.name for t, b, a in zip(ex.figure.data, before, after, strict=True) if b != a}
    assert {"this batch", "this step's GEMMs", "KV read"} <= moved
    assert not moved & {"attainable FLOP/s", "bandwidth floor", "decode step", "memory limit"}
    for trace, values in zip(ex.figure.data, after, strict=True):
        assert list(changes(trace._props, values)) == []  # the figure holds the new data


def test_speculation_controls_draw_per_token_latency_and_the_crossover():
    # k = 3, acceptance 0.6, 512 tokens of context on Llama 3.1 8B / H100: tests/test_speculative.py
    # derives by hand that speculation stops paying at batch 99
    import numpy as np

    from itlkit.widgets.decode import DecodeExplorer

    e = DecodeExplorer(context_tokens=512)
    trace = next(t for t in e.figure.data if t.name == "per token, speculative")
    assert len(trace.x) == 0  # off at k = 0
    e.spec_k.value = 3
    e.spec_acceptance.value = 0.6
    trace = next(t for t in e.figure.data if t.name == "per token, speculative")
    decode = next(t for t in e.figure.data if t.name == "decode step")
    x, spec, plain = np.asarray(trace.x), np.asarray(trace.y), np.asarray(decode.y)
    assert "stops paying at batch 99" in e.figure.layout.title.text
    assert np.all(spec[x < 99] < plain[x < 99]) and np.all(spec[x >= 99] >= plain[x >= 99])
    assert spec[x == 1][0] == pytest.approx(plain[x == 1][0] / 2.176)  # batch 1: the step / E


def test_the_tp_link_prices_the_all_reduce_bytes_over_nvlink_pcie_or_the_network():
    # Llama 3.1 8B at TP 2, batch 64: two all-reduces per layer x 32 layers of 64 tokens x 4,096
    # hidden x 2 bytes; a ring sends 2 (tp - 1) / tp = 1 of that message per GPU: 33,554,432 B.
    # One direction: H100 NVLink 450 GB/s, its PCIe Gen5 x16 64 GB/s, 100 Gb/s Ethernet 12.5 GB/s.
    sent = 2 * 32 * 64 * 4096 * 2
    ex = DecodeExplorer(tp=2)
    seconds = {}
    for link, bytes_per_second in (("own", 450e9), ("pcie", 64e9), ("network", 12.5e9)):
        ex.link.value = link
        bar = _bar(ex.figure, "all-reduce").y[0]  # ms, the decode step's
        assert bar == pytest.approx(sent / bytes_per_second * 1e3, rel=1e-6), link
        assert "33.55 MB" in ex.status.value and f"{bytes_per_second / 1e9:.1f} GB/s" in (
            ex.status.value
        )
        seconds[link] = bar
    assert seconds["own"] < seconds["pcie"] < seconds["network"]
    # a single GPU sends nothing, whatever the link says
    ex.tp.value = 1
    assert _bar(ex.figure, "all-reduce").y[0] == 0
    assert "all-reduce in the decode step" not in ex.status.value
