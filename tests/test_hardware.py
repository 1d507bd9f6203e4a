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


@pytest.mark.parametrize(
    ("slug", "memory_bytes", "bytes_per_second", "precision", "dense_flops_per_second"),
    [
        # GA102 whitepaper, RTX 3090: 24 GB, 936 GB/s; BF16 (FP32 accumulate) 71 dense / 142 sparse.
        ("rtx-3090", 24e9, 936e9, "bf16", 142e12 / 2),
        # RTX A6000: 48 GB, 768 GB/s; "Tensor Performance 309.7 TFLOPS" (with sparsity).
        ("rtx-a6000", 48e9, 768e9, "fp16", 309.7e12 / 2),
        # L40 datasheet: 864 GB/s; FP8 362 | 724* (* with sparsity).
        ("l40", 48e9, 864e9, "fp8", 724e12 / 2),
        # A10 datasheet: 24 GB, 600 GB/s; INT8 250 | 500* TOPS.
        ("a10", 24e9, 600e9, "int8", 500e12 / 2),
        # RTX 5090: 32 GB, 1,792 GB/s; FP16 tensor 838 sparse with FP16 accumulate, a quarter of
        # that dense with FP32 accumulate (GeForce half rate): 209.5.
        ("rtx-5090", 32e9, 1792e9, "bf16", 838e12 / 4),
        ("rtx-5090", 32e9, 1792e9, "fp4", 3352e12 / 2),  # "3,352 AI TOPS" is FP4 with sparsity
    ],
)
def test_added_gpus_match_their_datasheets(
    slug, memory_bytes, bytes_per_second, precision, dense_flops_per_second
):
    gpu = get_gpu(slug)
    assert gpu.hbm_bytes == memory_bytes
    assert gpu.hbm_bytes_per_second == pytest.approx(bytes_per_second, rel=1e-12)
    assert gpu.peak_flops_per_second[precision] == pytest.approx(dense_flops_per_second, rel=1e-3)


@pytest.mark.parametrize("slug", ["rtx-3090", "rtx-a6000", "a10"])
def test_ampere_cards_without_fp8_run_fp8_weights_at_bf16(slug):
    gpu = get_gpu(slug)
    assert "fp8" not in gpu.peak_flops_per_second
    assert ridge_flops_per_byte(gpu, PRECISIONS["fp8"]) == ridge_flops_per_byte(
        gpu, PRECISIONS["bf16"]
    )


def test_pcie_only_cards_talk_over_pcie():
    # PCIe Gen4 x16: 64 GB/s both ways, 32 GB/s each way; Gen5 doubles it.
    assert get_gpu("l40").link_bytes_per_second == 32e9
    assert get_gpu("rtx-5090").link_bytes_per_second == 64e9
