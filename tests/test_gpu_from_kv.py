"""The GPU a page's KV cache size implies (`vllm:cache_config_info`), and bad info lines.

The page is real (data/real-pages/kubeai-llama31-8b-fp8-v0.5, see its provenance); expected
sizes are derived here from its labels and the model's published shape."""

from __future__ import annotations

import pytest
from _paths import REAL_PAGES

from itlkit.errors import SourceError
from itlkit.metrics.page_info import cache_config, cache_config_of_files
from itlkit.physics.gpu_from_kv import gpus_matching, kv_evidence
from itlkit.physics.roofline import Deployment

KUBEAI = REAL_PAGES / "kubeai-llama31-8b-fp8-v0.5" / "metrics.prom"


def test_the_cache_config_labels_are_read_from_a_real_page():
    config = cache_config_of_files([KUBEAI])
    assert (config["num_gpu_blocks"], config["block_size"]) == ("4574", "16")
    assert config["gpu_memory_utilization"] == "0.9"


def test_a_page_without_cache_config_and_a_malformed_line():
    assert cache_config("vllm:num_requests_running 3\n") is None
    with pytest.raises(SourceError, match=r"page.prom:2: malformed vllm:cache_config_info"):
        cache_config('x 1\nvllm:cache_config_info{block_size="16" 1\n', source="page.prom")


def test_the_kv_cache_implies_the_memory_of_the_card():
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", weight_precision="fp8")
    e = kv_evidence(dep, num_gpu_blocks=4574, block_size=16, gpu_memory_utilization=0.9)
    # 4,574 x 16 tokens x (2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B) = 9.592 GB
    assert e.kv_bytes_per_gpu == 4574 * 16 * 131072
    # (weights + KV) / 0.9, as GiB at the low end; + 3 GB and 10% reserve at the high end
    weights = e.weight_bytes_per_gpu
    assert e.low_hbm_bytes == pytest.approx((weights + e.kv_bytes_per_gpu) / 0.9 / 1.073741824)
    assert e.high_hbm_bytes == pytest.approx((weights + e.kv_bytes_per_gpu + 3e9) / 0.81)
    cards = gpus_matching(dep, e)
    assert {"l4", "a10"} <= set(cards) and not {"h100-sxm", "a100-80gb-sxm", "l40s"} & set(cards)
