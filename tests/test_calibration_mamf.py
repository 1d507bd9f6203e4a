"""A cell lent to another GPU keeps its share of what that GPU's matmuls can reach.

Expected shares come from the published table, not from itlkit: Stas Bekman's "Maximum
Achievable Matmul FLOPS comparison table" (BF16; stas00/ml-engineering
compute/accelerator/README.md @ 744d01e1) measured 271.2 TFLOPS on an A100 SXM, 794.5 on an
H100 SXM ("H200 is the same"), 1,745 on a B200, 668.4 on an MI300X and 1,565 on an MI355X. The
datasheet peaks they are divided by are the catalog's: A100 312, H100 989.4, B200 2,250, MI300X
1,307.4, MI355X 2,500 TFLOPS dense BF16 (tests/data/gpus.json and their sources).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from test_calibration import group_of

from itlkit.errors import ConfigError
from itlkit.physics.calibration import Calibration, calibration_from_json
from itlkit.physics.hardware import achievable_matmul_share
from itlkit.physics.roofline import Deployment, step_time

A100, H100, MI300X, MI355X = 271.2 / 312.0, 794.5 / 989.4, 668.4 / 1307.4, 1565.0 / 2500.0


def test_the_achievable_share_is_the_published_mamf_over_the_datasheet_peak():
    assert achievable_matmul_share("a100-80gb-sxm") == pytest.approx(A100)
    assert achievable_matmul_share("h100-sxm") == pytest.approx(H100)
    assert achievable_matmul_share("h200-sxm") == pytest.approx(H100)
    assert achievable_matmul_share("b200") == pytest.approx(1745.0 / 2250.0)
    assert achievable_matmul_share("mi300x") == pytest.approx(MI300X)
    assert achievable_matmul_share("l40s") is None  # not in the table: not guessed


def _calibration(**coverage) -> Calibration:
    groups = {"gpu:a100": {**group_of(0.7), "step_model": "reference"},
              "gpu:mi300x/SGLang/MoE": group_of(0.5)}  # fmt: skip
    return Calibration(efficiency=0.9, fitted_on=("x",), groups=groups,
                       coverage={"version@gpu:a100": ["0.10.1.1"], **coverage})  # fmt: skip


def test_a_cell_lent_to_another_gpu_scales_its_matmuls_by_the_two_shares():
    cal = _calibration(**{"gpu@gpu:a100": ["a100-40gb-sxm", "a100-80gb-sxm", "h100-64gb"]})
    mi355x = cal.for_gpu("mi355x", release=(0, 11, 2))  # the nearest release's cell, the A100's
    assert mi355x.group == "gpu:a100"
    assert mi355x.compute_scale == pytest.approx(MI355X / A100)  # 0.72; the H100 64 GB unmeasured
    assert "its matmuls x 0.72" in mi355x.scope and "63% of its peak" in mi355x.scope
    # the reference model's MFU (0.5 of peak) takes the scale: a compute-bound chunk is slower
    deployment = Deployment.create(model="llama-3.1-8b", gpu="mi355x")
    assert mi355x.apply(deployment).mfu == pytest.approx(0.5 * MI355X / A100)
    lent = step_time(mi355x.apply(deployment), batch_size=1, context_tokens=1, chunk_tokens=8192)
    unscaled = step_time(replace(mi355x, compute_scale=1.0).apply(deployment), batch_size=1,
                         context_tokens=1, chunk_tokens=8192)  # fmt: skip
    assert lent.compute_bound and unscaled.compute_bound
    assert lent.matmul_seconds == pytest.approx(unscaled.matmul_seconds * A100 / MI355X)
    # on its own GPUs nothing is lent and nothing scaled
    assert cal.for_gpu("a100-80gb-sxm").compute_scale == 1.0
    assert cal.for_gpu("a100-80gb-sxm").apply(deployment).mfu == 0.5


def test_an_engine_model_cell_lent_upward_is_capped_at_peak_and_unmeasured_sides_unscaled():
    cal = _calibration(**{"gpu@gpu:mi300x/SGLang/MoE": ["mi300x"]})
    # SGLang's MI300X cell lent to the MI325X, its sibling (no MI325X cell here)
    mi325x = cal.for_gpu("mi325x", "SGLang", moe=True)
    assert mi325x.compute_scale == pytest.approx((784.9 / 1307.4) / MI300X)
    deployment = Deployment.create(model="llama-3.1-8b", gpu="mi325x")
    assert mi325x.apply(deployment).mfu == pytest.approx(0.5 * (784.9 / 1307.4) / MI300X)
    assert replace(mi325x, compute_scale=3.0).apply(deployment).mfu == 1.0  # never past peak
    # a calibration without the lenders' GPUs (written before `gpu@`), or a GPU not measured
    assert _calibration().for_gpu("mi355x", release=(0, 11, 2)).compute_scale == 1.0
    with_gpus = _calibration(**{"gpu@gpu:a100": ["a100-80gb-sxm"]})
    assert with_gpus.for_gpu("l40s", release=(0, 11, 2)).compute_scale == 1.0


def test_the_scale_is_never_written_nor_read_from_a_calibration_file():
    lent = _calibration(**{"gpu@gpu:a100": ["a100-80gb-sxm"]}).for_gpu("mi355x")
    doc = lent.to_json()
    assert "compute_scale" not in doc
    with pytest.raises(ConfigError, match="unknown keys compute_scale"):
        calibration_from_json(json.loads(json.dumps({**doc, "compute_scale": 2.0})))


def test_the_bundled_calibration_records_each_cells_gpus():
    from itlkit.cli._runs import load_calibration

    bundled = load_calibration("bundled")
    assert bundled.coverage["gpu@gpu:h100"] == ["h100-sxm"]
    assert bundled.coverage["gpu@gpu:a100"] == ["a100-40gb-sxm", "a100-80gb-sxm"]


def test_explain_shows_the_measured_ceiling_beside_the_datasheet_peak(capsys):
    from itlkit.cli import main

    assert main(["explain", "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]) == 0
    out = capsys.readouterr().out
    assert "794.5 TFLOP/s (MAMF, stas00/ml-engineering)" in out
    assert "80% of the datasheet's 989.4 TFLOP/s" in out
    assert main(["explain", "--gpu", "l40s", "--model", "llama-3.1-8b", "--batch", "8"]) == 0
    assert "achievable matmul" not in capsys.readouterr().out  # not measured: not shown
