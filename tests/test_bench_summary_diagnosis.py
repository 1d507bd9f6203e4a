"""`itlkit diagnose` of a summary-only `vllm bench serve` file: host overhead is what a summary
can show; the other causes say they cannot be seen. Expected numbers are derived here from the
file's own fields, the bundled calibration's host cost and the roofline floor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _paths import DATA, REAL_PAGES

from itlkit.physics.calibration import read_calibration
from itlkit.physics.roofline import Deployment, decode_step

OPT_BENCH = REAL_PAGES / "er0080-opt125m-3090-bench-v0.25" / "bench.json"
OPT = str(DATA / "hf_configs" / "opt-125m" / "config.json")


def diagnose(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "itlkit", "diagnose", *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_real_summary_far_above_floor_and_host_cost_is_host_overhead():
    done = diagnose(str(OPT_BENCH), "--model", OPT, "--gpu", "rtx-3090", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # concurrency 2; context (256 input + 128 / 2 output tokens) / 8 requests = 40 tokens
    assert (doc["batch_size"], doc["context_tokens"]) == (2, 40.0)
    # a healthy host is vLLM 0.15.1's: the bundled constants fitted on its H100 runs
    host = read_calibration(DATA.parent.parent / "data" / "calibration.json").for_gpu("h100-sxm")
    healthy = host.host_seconds_per_step + 2 * host.host_seconds_per_sequence
    assert doc["healthy_host_seconds"] == pytest.approx(healthy)
    floor = decode_step(Deployment.create(model=OPT, gpu="rtx-3090"), batch_size=2,
                        context_tokens=40.0).floor_seconds  # fmt: skip
    (reading,) = doc["gpu_range"]
    assert reading["host_excess_ratio"] == pytest.approx(
        (10.492878499917424e-3 - floor / 0.35) / healthy
    )
    assert not doc["healthy"] and doc["causes"][0] == {"cause": "host_overhead", "score": 1.0}
    assert all(c["score"] == 0 and "cannot be seen" in c["evidence"][0] for c in doc["causes"][1:])


def test_a_summary_near_its_floor_is_healthy(tmp_path):
    # Llama 3.1 8B BF16 on an H100 at concurrency 1: a 4.8 ms floor; a 5.4 ms median gap is
    # within the GPU's plausible efficiency, so no host overhead
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({
        "model_id": "meta-llama/Llama-3.1-8B-Instruct", "completed": 20, "max_concurrency": 1,
        "total_input_tokens": 2000, "total_output_tokens": 4000, "median_itl_ms": 5.4,
        "mean_itl_ms": 5.5, "p99_itl_ms": 6.0, "median_ttft_ms": 30.0,
    }))  # fmt: skip
    done = diagnose(str(bench), "--gpu", "h100-sxm", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["healthy"] and doc["causes"][0]["score"] < 0.5


def test_a_summary_of_an_unknown_model_is_refused_in_one_line():
    done = diagnose(str(REAL_PAGES / "er0080-qwen27b-fp8-tp2-3090-specdec-bench-v0.25" /
                        "bench.json"))  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "is not in the catalog: pass --model" in done.stderr


def test_a_detailed_bench_file_takes_its_batch_from_the_clients_concurrency(tmp_path):
    # a bench file has no running-requests gauge: the client's max_concurrency is the batch,
    # and the report says it assumed so; an open-loop file (no concurrency) names itself
    from itlkit.bundled import bundled_path

    doc = json.loads(bundled_path("synthetic-vllm-bench-serve.json").read_text())
    doc.pop("max_concurrency", None)
    open_loop = tmp_path / "open.json"
    open_loop.write_text(json.dumps(doc))
    done = diagnose(str(open_loop), "--gpu", "h100-sxm")
    assert done.returncode == 2
    assert f"{open_loop}: a bench result does not record how many requests ran at once" in (
        done.stderr
    )
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps({**doc, "max_concurrency": 16}))
    done = diagnose(str(closed), "--gpu", "h100-sxm")
    assert done.returncode == 0, done.stderr
    assert "assumed: batch 16 (the bench client's max_concurrency; --batch)" in done.stdout
