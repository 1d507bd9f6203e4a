import json

import pytest
from _paths import DATA

from itlkit.errors import UnknownNameError
from itlkit.physics.hardware import GPUS, get_gpu, ridge_flops_per_byte
from itlkit.units import PRECISIONS

SPEC = json.loads((DATA / "gpus.json").read_text())["gpus"]


def test_catalog_holds_every_gpu_of_the_spec():
    assert set(GPUS) == set(SPEC)


@pytest.mark.parametrize("slug", sorted(SPEC))
def test_dense_datasheet_numbers_in_si_units(slug):
    spec, gpu = SPEC[slug], GPUS[slug]
    assert gpu.hbm_bytes == pytest.approx(spec["memory_gb"] * 1e9, rel=1e-12)
    assert gpu.hbm_bytes_per_second == pytest.approx(spec["mem_bw_tbps"] * 1e12, rel=1e-12)
    for key, field in [
        ("bf16", "bf16_dense_tflops"),
        ("fp16", "fp16_dense_tflops"),
        ("fp8", "fp8_dense_tflops"),
        ("int8", "int8_dense_tops"),
        ("fp4", "fp4_dense_tflops"),
    ]:
        if spec[field] is None:
            assert key not in gpu.peak_flops_per_second
        else:
            assert gpu.peak_flops_per_second[key] == pytest.approx(spec[field] * 1e12, rel=1e-12)
    if spec["interconnect_gbps_bidir"] is None:
        assert gpu.interconnect_bytes_per_second_bidir is None
    else:
        expected = spec["interconnect_gbps_bidir"] * 1e9
        assert gpu.interconnect_bytes_per_second_bidir == pytest.approx(expected)
    assert gpu.source


def test_worked_example_ridge_is_295_flop_per_byte():
    # 989 TFLOP/s / 3.35 TB/s = 295 FLOP/B (worked example, BF16 dense).
    assert round(ridge_flops_per_byte(get_gpu("h100-sxm"), PRECISIONS["bf16"])) == 295


def test_gpu_without_fp8_runs_fp8_weights_at_bf16():
    a100 = get_gpu("a100-80gb-sxm")
    assert ridge_flops_per_byte(a100, PRECISIONS["fp8"]) == pytest.approx(312e12 / 2.039e12)


def test_unknown_gpu_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid GPUs: h100-sxm, h100-pcie"):
        get_gpu("h1000")
