"""`itlkit explain` end to end, as a user runs it (a subprocess)."""

import json
import math
import subprocess
import sys

import pytest
from _reference import CHUNK_2048_MS, ms_text

from itlkit.cli import main


def itlkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "itlkit", *args], capture_output=True, text=True, timeout=60
    )


def explain_json(*args: str) -> dict:
    result = itlkit("explain", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_worked_example_from_the_cli():
    out = explain_json(
        "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "64", "--context", "4096",
        "--chunk", "2048", "--prompt", "4096", "--measured-step", "0.024",
    )  # fmt: skip
    assert out["weight_bytes"] == 16_060_522_496
    assert out["kv_bytes"] == 34_359_738_368
    assert round(out["weight_read_seconds"] * 1e3, 2) == 4.79
    assert round(out["kv_read_seconds"] * 1e3, 2) == 10.26
    assert round(out["floor_seconds"] * 1e3, 2) == 15.05
    assert round(out["ridge_flops_per_byte"]) == 295
    assert round(out["mixed_step_flops"] / 1e12, 1) == 33.9
    assert round(out["mixed_step_seconds"] * 1e3) == 79
    assert round(out["mixed_step_over_floor"], 1) == 5.2
    assert out["prefill_steps"] == 2
    assert round(out["mbu"] * 100) == 63


def test_small_chunk_fp8_kv_and_tp_from_the_cli():
    small = explain_json("--chunk", "512", "--prompt", "4096")
    assert round(small["mixed_step_seconds"] * 1e3) == 29
    assert small["prefill_steps"] == 8
    fp8 = explain_json("--kv-precision", "fp8")
    assert round(fp8["kv_read_seconds"] * 1e3, 1) == 5.1
    big = explain_json("--batch", "128", "--context", "4096", "--kv-precision", "fp8")
    assert big["fits_in_memory"] is True
    tp4 = explain_json("--model", "llama-3.1-70b", "--tp", "4", "--batch", "1", "--context", "1")
    assert round(tp4["weight_bytes"] / 1e9, 1) == 35.3  # per GPU
    assert round(tp4["weight_read_seconds"] * 1e3, 1) == 10.5


def test_human_output_reads_as_a_worked_answer():
    result = itlkit("explain", "--chunk", "2048")
    assert result.returncode == 0
    text = result.stdout
    for expected in ("16.06 GB -> 4.79 ms", "34.36 GB -> 10.26 ms", "15.05 ms", "295 FLOP/B"):
        assert expected in text
    assert f"{ms_text(CHUNK_2048_MS)} (5.2x the floor)" in text


def test_own_config_json_works_as_model(tmp_path):
    config = tmp_path / "my-llama" / "config.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps(
            {
                "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                "vocab_size": 128256, "tie_word_embeddings": False,
            }
        )
    )  # fmt: skip
    out = explain_json("--model", str(config))
    assert out["model"] == "my-llama"
    assert round(out["floor_seconds"] * 1e3, 2) == 15.05


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "llama-9"], "valid models: llama-3.1-8b"),
        (["--gpu", "h1000"], "valid GPUs: h100-sxm"),
        (["--weights-precision", "nf4"], "valid weight precisions: bf16, fp16, fp8, int8, int4"),
        (["--kv-precision", "int4"], "valid KV precisions: bf16, fp16, fp8"),
        (["--batch", "0"], "--batch: '0' is not a number of sequences from 1 to 10,000,000"),
        (["--context", "-5"], "--context: '-5' is not a number of tokens from 1 to 100,000,000"),
        (["--tp", "0"], "--tp: '0' is not a whole number from 1 to"),
        (["--batch", "1" * 400], "--batch: '1111111111111111111111111111111111111...' is"),
        (["--chunk", "1e30"], "--chunk: '1e30' is not a number of tokens"),
        (["--mfu", "-inf"], "--mfu: '-inf' is not a fraction from 0.001 to 1"),
        (["--mfu", "1e-320"], "--mfu: '1e-320' is not a fraction"),
        (["--tp", "3"], "TP=3 does not divide the 32 attention heads"),
        (["--model", "qwen2.5-7b", "--tp", "14"], "TP=14 does not divide the 4 KV heads"),
        (["--mfu", "2"], "--mfu: '2' is not a fraction from 0.001 to 1"),
        (["--model", "/nonexistent/config.json"], "no such model config.json file"),
    ],
)
def test_bad_input_exits_nonzero_with_a_clear_message(args, message):
    result = itlkit("explain", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_configuration_that_does_not_fit_says_so():
    result = itlkit("explain", "--batch", "1000")
    assert result.returncode == 1
    assert "does not fit in GPU memory" in result.stderr
    assert "room for 104 sequences" in result.stderr
    weights = itlkit("explain", "--model", "llama-3.1-405b", "--json")
    assert weights.returncode == 1
    assert json.loads(weights.stdout)["fits_in_memory"] is False
    assert "raise TP or quantize" in weights.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--measured-step", "1e-5"], "faster than the bandwidth floor 15.05 ms (MBU over 100%)"),
        (["--measured-step", "1e-9"], "--measured-step: '1e-9' is not a step time in seconds"),
        (["--measured-step", "1e308"], "--measured-step: '1e308' is not a step time in seconds"),
        (["--measured-step", "0.015"], "faster than the bandwidth floor"),  # 15.00 < 15.05 ms
        (["--mfu", "1.5"], "--mfu: '1.5' is not a fraction from 0.001 to 1"),
        (
            ["--host-overhead", "-1"],
            "--host-overhead: '-1' is not a number of seconds from 0 to 10",
        ),
        (["--allreduce-latency", "nan"], "--allreduce-latency: 'nan' is not a number of seconds"),
    ],
)
def test_impossible_numbers_are_input_errors(args, message):
    result = itlkit("explain", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_measured_step_just_above_the_floor_is_accepted():
    # floor = (16.06 + 34.36) GB / 3.35 TB/s = 15.05 ms: a 15.1 ms step is 99.7% MBU, possible.
    result = itlkit("explain", "--measured-step", "0.0151", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["mbu"] == pytest.approx(
        15.0508 / 15.1, abs=1e-3
    )


def test_debug_shows_the_traceback_of_a_failure():
    # a TP that does not divide the heads fails inside the command (an unknown --model is
    # refused by argparse, before any command runs)
    plain = itlkit("explain", "--model", "llama-3.1-8b", "--tp", "3")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    debug = itlkit("--debug", "explain", "--model", "llama-3.1-8b", "--tp", "3")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_a_number_out_of_range_is_one_line_not_a_warning_and_a_wrong_answer(capsys):
    # numpy's overflow warning would print above an inf in the answer; the CLI turns it into
    # the one line of the error contract (exit 2), whichever input slipped past its bound
    import argparse

    import numpy as np

    from itlkit.cli import _run_guarded

    def overflow(_):
        with np.errstate(over="warn"):
            return int(np.float64(1e308) * np.float64(10) > 0)

    assert _run_guarded(argparse.Namespace(command="explain", func=overflow)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a number went out of range while computing" in err


def test_the_budget_is_split_as_vllm_splits_it(capsys):
    # issue 19, item 4: vLLM schedules the running decodes first from max_num_batched_tokens
    # (vllm/v1/core/sched/scheduler.py, token_budget): a 2,048 budget beside 64 decodes carries
    # 1,984 prompt tokens, so 2,048 tokens go through the GEMMs, and a 4,096-token prompt takes
    # ceil(4,096 / 1,984) = 3 steps
    code = main(["explain", "--batch", "64", "--context", "4096", "--max-num-batched-tokens",
                 "2048", "--prompt", "4096", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (doc["chunk_tokens"], doc["mixed_step_tokens"]) == (1984, 2048)
    assert doc["prefill_steps"] == math.ceil(4096 / 1984) == 3
    assert main(["explain", "--batch", "64", "--max-num-batched-tokens", "64"]) == 2
    assert "leaves no room for a chunk beside 64 decodes" in capsys.readouterr().err


def test_the_link_tp_crosses_is_named_and_priced_with_its_calibrated_bandwidth():
    from _paths import BUNDLED_CALIBRATION

    # Qwen2.5-7B, TP2 on A100s: 2 all-reduces x 28 layers; each moves 2 (tp - 1) / tp x 3,584
    # x 2 B per token, 64 tokens: 56 x 917,504 B = 25.69 MB per decode step
    args = ("--model", "qwen2.5-7b", "--gpu", "a100-80gb-sxm", "--tp", "2", "--batch", "64",
            "--calibration", "bundled")  # fmt: skip
    share = json.loads(BUNDLED_CALIBRATION.read_text())["groups"]["gpu:a100"][
        "pcie_bandwidth_share"]  # fmt: skip
    pcie = explain_json(*args, "--interconnect", "pcie")
    # the datasheet's PCIe Gen4 x16: 64 GB/s both ways, 32 GB/s each; the A100 cell's share of it
    assert pcie["link"] == "pcie" and pcie["link_bytes_per_second"] == pytest.approx(32e9 * share)
    assert explain_json(*args)["link"] == "nvlink"  # the SXM board's own link
    text = itlkit("explain", *args, "--interconnect", "pcie").stdout
    assert "56 calls x" in text and "25.69 MB over PCIe" in text
    assert f"{share:.3g} of the datasheet's 32 GB/s, fitted" in text
    network = explain_json(*args, "--interconnect", "network")
    assert network["link"] == "network" and network["calibrated_step_seconds"] > (
        pcie["calibrated_step_seconds"])  # fmt: skip


def test_an_unknown_interconnect_is_one_line():
    result = itlkit("explain", "--tp", "2", "--interconnect", "infiniband")
    assert result.returncode == 2
    assert "--interconnect" in result.stderr and len(result.stderr.strip().splitlines()) == 1
