"""The GPUs the catalog gained (and the ones the issue listed that it already had) against the
figures their sources print, and each one's roofline ridge point derived here: peak / bandwidth.

Every row below copies what the cited page prints (sparse totals, per-module or per-8-GPU figures
included) and derives the per-GPU dense figure in the test, so that a wrong catalog literal, or a
derivation done twice, shows. The full citations sit in each entry's `source` and in
tests/data/gpus.json. Capacities follow the catalog's rule, the datasheet's number x 1e9 B.
"""

import json

import pytest
from _paths import DATA

from itlkit.physics.hardware import compute_precision, get_gpu, ridge_flops_per_byte
from itlkit.units import PRECISIONS

SPEC = json.loads((DATA / "gpus.json").read_text())["gpus"]
TB, TF = 1e12, 1e12  # decimal, as datasheets print them

# slug: (memory bytes, HBM bytes/s, {precision: dense FLOP/s}), each derived from printed figures
DATASHEETS = {
    # BSC: "4x NVIDIA Hopper H100 64GB HBM2"; no NVIDIA bandwidth: the H100 PCIe's HBM2e ">2,000
    # GBps" (flagged upper bound); peaks assumed = H100 SXM5 80GB's dense column (glennklockwood).
    "h100-64gb": (64e9, 2.0 * TB, {"bf16": 989.4 * TF, "fp8": 1978.9 * TF}),
    # A100 40GB PCIe: 1,555 GB/s; BF16 312 | 624*, INT8 624 | 1248* (* with sparsity).
    "a100-40gb-pcie": (40e9, 1555e9, {"bf16": 624 * TF / 2, "int8": 1248 * TF / 2}),
    # HGX B300, 8 GPUs, '* with sparsity': FP16/BF16 36 PF*, FP8 72 PF*, INT8 2 POPS*; FP4 105 PF
    # dense (glennklockwood: 13,125 per GPU); 288 GB and 8 TB/s per GPU (NVIDIA blog; the HGX
    # table's "up to 2.3 TB" is 8 x 288 GB rounded).
    "b300": (
        288e9,
        8 * TB,
        {
            "bf16": 36e15 / 8 / 2,
            "fp8": 72e15 / 8 / 2,
            "int8": 2e15 / 8 / 2,
            "fp4": 105e15 / 8,
        },
    ),
    # RTX PRO 6000 Blackwell: 96 GB, 1,792 GB/s; BF16 503.8 dense; "4000 AI TOPS" = FP4 sparse
    # (4.03 PF printed), i.e. FP4 dense = 4 x BF16 dense and FP8 = 2 x (printed 1.01 PF).
    "rtx-pro-6000-blackwell": (
        96e9,
        1792e9,
        {"bf16": 503.8 * TF, "fp8": 2 * 503.8 * TF, "fp4": 4 * 503.8 * TF},
    ),
    # MI100: 32 GB, 1.228 TB/s; FP16 matrix 184.6, bfloat16 92.3 (half rate on CDNA 1).
    "mi100": (32e9, 1.228 * TB, {"fp16": 184.6 * TF, "bf16": 92.3 * TF, "int8": 184.6 * TF}),
    # MI210: 64 GB, 1.6 TB/s; FP16 matrix 181 TF, INT8 181 TOPS; BF16 = FP16 on CDNA 2.
    "mi210": (64e9, 1.6 * TB, {"bf16": 181 * TF, "fp16": 181 * TF, "int8": 181 * TF}),
    # MI250X per OAM: 128 GB, 3.2 TB/s, FP16/BF16 383.0 TF, INT8 383.0 TOPS, over 2 GCDs (each a
    # device; ROCm: 1.6 TB/s per GCD).
    "mi250x": (128e9 / 2, 3.2 * TB / 2, {"bf16": 383.0 * TF / 2, "int8": 383.0 * TF / 2}),
    # MI355X: 288 GB, 8 TB/s; dense FP16/BF16 2.5 PF (5 PF with sparsity), FP8 5 PF (10.1 sparse
    # per AMD, printed rounded), FP4 10.1 PF.
    "mi355x": (288e9, 8 * TB, {"bf16": 5e15 / 2, "fp8": 5e15, "fp4": 10.1e15}),
    # Entries the issue listed that the catalog already held (shared/spec/gpus.json):
    # GB200 NVL72 per GPU: FP16/BF16 5 PF*, FP8 10 PF*, 186 GB, 8 TB/s.
    "gb200-gpu": (186e9, 8 * TB, {"bf16": 5e15 / 2, "fp8": 10e15 / 2}),
    # A100 40GB SXM4: 1,555 GB/s; BF16 624* TF.
    "a100-40gb-sxm": (40e9, 1555e9, {"bf16": 624 * TF / 2}),
    # MI300X: 192 GB, 5.3 TB/s, FP16/BF16 1307.4, FP8 2614.9 dense.
    "mi300x": (192e9, 5.3 * TB, {"bf16": 1307.4 * TF, "fp8": 2614.9 * TF}),
    # MI325X: 256 GB, 6 TB/s, same compute as MI300X.
    "mi325x": (256e9, 6 * TB, {"bf16": 1307.4 * TF, "fp8": 2614.9 * TF}),
}
ADDED = (
    "h100-64gb",
    "a100-40gb-pcie",
    "b300",
    "rtx-pro-6000-blackwell",
    "mi100",
    "mi210",
    "mi250x",
    "mi355x",
)


def test_every_added_gpu_is_in_the_tests_datasheet_rows_with_its_sources():
    for slug in ADDED:
        row = SPEC[slug]
        assert row["sources"] and all(s.strip() for s in row["sources"])
        assert get_gpu(slug).source == " | ".join(row["sources"])


@pytest.mark.parametrize("slug", sorted(DATASHEETS))
def test_catalog_matches_the_printed_figures(slug):
    memory_bytes, bytes_per_second, peaks = DATASHEETS[slug]
    gpu = get_gpu(slug)
    assert gpu.hbm_bytes == pytest.approx(memory_bytes, rel=1e-12)
    assert gpu.hbm_bytes_per_second == pytest.approx(bytes_per_second, rel=1e-12)
    for precision, flops in peaks.items():
        # 2 x 503.8 = 1007.6 where hmc-tech prints 1.01 PF: the tolerance the rounding needs
        tolerance = 1e-2 if slug == "rtx-pro-6000-blackwell" else 1e-12
        assert gpu.peak_flops_per_second[precision] == pytest.approx(flops, rel=tolerance)


@pytest.mark.parametrize("slug", sorted(DATASHEETS))
def test_ridge_point_is_peak_over_bandwidth(slug):
    _, bytes_per_second, peaks = DATASHEETS[slug]
    gpu = get_gpu(slug)
    for precision, flops in peaks.items():
        if precision not in PRECISIONS:  # fp4: a peak, not a weight format itlkit takes
            continue
        ridge = ridge_flops_per_byte(gpu, PRECISIONS[precision])
        assert ridge == pytest.approx(flops / bytes_per_second, rel=1e-2)


@pytest.mark.parametrize(
    ("slug", "precision", "flop_per_byte"),
    [
        ("b300", "bf16", 281.25),  # 2,250 TF / 8 TB/s
        ("b300", "fp8", 562.5),  # 4,500 / 8
        ("mi355x", "bf16", 312.5),  # 2,500 / 8
        ("mi250x", "bf16", 119.6875),  # 191.5 / 1.6, one GCD (= 383 / 3.2 per OAM)
        ("mi210", "bf16", 113.125),  # 181 / 1.6
        ("a100-40gb-pcie", "bf16", 312 / 1.555),  # 200.6
        ("h100-64gb", "bf16", 494.7),  # 989.4 / 2.0 (flagged bandwidth)
    ],
)
def test_ridge_points_in_flop_per_byte(slug, precision, flop_per_byte):
    gpu = get_gpu(slug)
    assert ridge_flops_per_byte(gpu, PRECISIONS[precision]) == pytest.approx(flop_per_byte)


def test_mi100_bf16_runs_at_half_its_fp16_rate():
    # CDNA 1 matrix cores: FP16 184.6 TF, bfloat16 92.3 TF, so the ridge halves too.
    mi100 = get_gpu("mi100")
    fp16 = ridge_flops_per_byte(mi100, PRECISIONS["fp16"])
    bf16 = ridge_flops_per_byte(mi100, PRECISIONS["bf16"])
    assert fp16 == pytest.approx(184.6e12 / 1.228e12)
    assert bf16 == pytest.approx(fp16 / 2)


@pytest.mark.parametrize("slug", ["a100-40gb-pcie", "mi100", "mi210", "mi250x"])
def test_gpus_without_fp8_run_fp8_weights_at_bf16(slug):
    gpu = get_gpu(slug)
    assert "fp8" not in gpu.peak_flops_per_second
    assert compute_precision(gpu, PRECISIONS["fp8"]) == "bf16"


def test_fp4_weights_run_at_the_fp4_rate_only_where_the_gpu_has_one():
    # W4A4 (AMD Quark's MXFP4, NVIDIA's NVFP4): AITER's FP4 GEMM on the MI355X, whose datasheet
    # gives 10.1 PF dense FP4 beside 8.0 TB/s; dequantized to 16 bits on a GPU without FP4.
    mi355x, h100 = get_gpu("mi355x"), get_gpu("h100-sxm")
    assert compute_precision(mi355x, PRECISIONS["fp4"]) == "fp4"
    assert ridge_flops_per_byte(mi355x, PRECISIONS["fp4"]) == pytest.approx(10100e12 / 8.0e12)
    assert compute_precision(h100, PRECISIONS["fp4"]) == "bf16"
    # int4 stays weight-only (Marlin, AWQ) even where the GPU has FP4 units
    assert compute_precision(mi355x, PRECISIONS["int4"]) == "bf16"
    assert PRECISIONS["fp4"].bytes_per_element == 0.5


def test_b300_int8_is_cut_below_its_bf16_rate():
    # Blackwell Ultra trades INT8 for FP4: the HGX B300 table's 2 POPS* over 8 GPUs is 125 TOPS
    # dense per GPU, under a 2,250 TF BF16 rate; W8A8 INT8 weights hit the roof at 15.6 FLOP/B.
    b300 = get_gpu("b300")
    assert compute_precision(b300, PRECISIONS["int8"]) == "int8"
    assert ridge_flops_per_byte(b300, PRECISIONS["int8"]) == pytest.approx(125e12 / 8e12)
    assert b300.peak_flops_per_second["int8"] < b300.peak_flops_per_second["bf16"]


def test_scale_up_links_as_the_sources_give_them():
    # one direction = bidirectional / 2, as the catalog models every link
    assert get_gpu("b300").link_bytes_per_second == 1800e9 / 2  # NVLink 5, 1.8 TB/s
    assert get_gpu("mi100").link_bytes_per_second == 276e9 / 2  # 3 x 92 GB/s
    assert get_gpu("mi210").link_bytes_per_second == 3 * 100e9 / 2  # 3 links x 100 GB/s bidir
    assert get_gpu("mi250x").link_bytes_per_second == 400e9 / 2  # the sibling GCD, 4 links
    assert get_gpu("mi355x").link_bytes_per_second == pytest.approx(7 * 153.6e9 / 2)
    # no scale-up link: PCIe Gen5 x16, 128 GB/s both ways
    assert get_gpu("rtx-pro-6000-blackwell").link_bytes_per_second == 128e9 / 2
