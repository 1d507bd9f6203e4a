"""Notebook 01 names what makes the decode step longer than its bandwidth floor.

Issue: at TP=2 the title read "decode step 7.60 ms (compute-bound)" for Llama 3.1 8B on H100 at
batch 64, though the 0.07 ms over the floor is all-reduce and the batch sits far below the ridge.

Derivation (outside itlkit's code), Llama 3.1 8B in BF16 on H100 SXM (989.4 TFLOP/s dense BF16,
3.35 TB/s HBM, NVLink 4 at 900 GB/s both ways = 450 GB/s each way):
- BF16 GEMMs do 2 FLOP per parameter per token over 2 bytes per parameter: 1 FLOP/B per token of
  the step, so their intensity reaches the ridge 989.4e12 / 3.35e12 = 295 FLOP/B at ~295 tokens,
  and at MFU 0.5 the FLOPs overtake the weight read at half that, ~148 tokens. 64 decodes are
  memory-bound; 1,024 are compute-bound.
- TP=2 all-reduce (ring, 2 per layer: after attention and after the MLP): each moves
  2 (tp-1)/tp x hidden x 2 B per token = 8,192 B per token per call; 64 calls x 64 tokens =
  33,554,432 B at 450 GB/s = 74.565 µs.
"""

import pytest

from itlkit.physics.roofline import Deployment, decode_step
from itlkit.plots.decode import decode_view, figure_title, over_floor_terms
from itlkit.widgets.decode import status_html

RIDGE_TOKENS_AT_HALF_MFU = 989.4e12 / 3.35e12 / 2  # ~148 tokens per step
ALLREDUCE_TP2_BATCH64_SECONDS = 2 * 32 * (2 * (2 - 1) / 2 * 4096 * 2) * 64 / 450e9


def _view(*, batch_size=64, tp=1, host_overhead_seconds=0.0):
    dep = Deployment.create(
        model="llama-3.1-8b", gpu="h100-sxm", tp=tp, host_overhead_seconds=host_overhead_seconds
    )
    return decode_view(dep, batch_size=batch_size, context_tokens=4096, chunk_tokens=2048)


def test_tp2_step_over_the_floor_is_all_reduce_not_compute():
    assert 64 < RIDGE_TOKENS_AT_HALF_MFU  # the batch is far below the ridge
    view = _view(tp=2)
    floor = float(view.decode.floor_seconds)
    step_ms = (floor + ALLREDUCE_TP2_BATCH64_SECONDS) * 1e3
    assert ALLREDUCE_TP2_BATCH64_SECONDS == pytest.approx(74.565e-6, rel=1e-4)
    title = figure_title(view)
    assert f"decode step {step_ms:.2f} ms (floor + all-reduce)" in title
    assert "compute-bound" not in title
    assert not view.compute_bound
    [(name, seconds)] = over_floor_terms(view.decode)
    assert name == "all-reduce"
    assert seconds == pytest.approx(ALLREDUCE_TP2_BATCH64_SECONDS, rel=1e-6)
    status = status_html(view)
    assert "decode step (floor + all-reduce)" in status
    assert "+74.6 µs all-reduce" in status


def test_host_overhead_is_named_as_host_overhead():
    view = _view(host_overhead_seconds=3e-3)
    floor_ms = float(view.decode.floor_seconds) * 1e3
    title = figure_title(view)
    assert f"decode step {floor_ms + 3.0:.2f} ms (floor + host overhead)" in title
    assert "compute-bound" not in title
    assert "+3.00 ms host overhead" in status_html(view)


def test_both_terms_largest_first():
    view = _view(tp=2, host_overhead_seconds=1e-3)  # 1 ms of host > 74.6 µs of all-reduce
    assert [name for name, _ in over_floor_terms(view.decode)] == ["host overhead", "all-reduce"]
    assert "(floor + host overhead + all-reduce)" in figure_title(view)


def test_compute_bound_only_past_the_ridge():
    assert 1024 > RIDGE_TOKENS_AT_HALF_MFU
    view = _view(batch_size=1024)
    assert view.compute_bound
    step = decode_step(view.deployment, batch_size=1024, context_tokens=4096)
    # GEMMs at 50% MFU: 2 x params x 1,024 tokens / (0.5 x 989.4e12), over the weight read
    gemm = float(step.matmul_seconds)
    excess = gemm - float(step.weight_read_seconds)
    assert excess > 0
    assert f"decode step {float(step.step_seconds) * 1e3:.2f} ms (compute-bound)" in figure_title(
        view
    )
    # at TP=2 the same batch is compute-bound and pays the all-reduce on top
    assert "(compute-bound + all-reduce)" in figure_title(_view(batch_size=1024, tp=2))


def test_at_the_floor_no_step_label():
    view = _view()
    assert over_floor_terms(view.decode) == ()
    assert "decode step" not in figure_title(view).split("→")[1]
