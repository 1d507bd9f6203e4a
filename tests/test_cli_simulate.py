"""`itlkit simulate` end to end: the JSON contract, exports, and one-line errors with exit 2."""

from __future__ import annotations

import json

import pytest

from itlkit.cli import main
from itlkit.metrics.readers import read_scrape_folder
from itlkit.metrics.series import histogram_series
from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS

KEYS = (
    "itl_mean_seconds", "itl_p50_seconds", "itl_p99_seconds", "ttft_mean_seconds",
    "ttft_p50_seconds", "ttft_p99_seconds", "e2e_mean_seconds", "requests_finished",
    "requests_in_flight", "steps", "simulated_seconds", "preemptions", "itl_buckets",
)  # fmt: skip


def _json(capsys, *args):
    assert main(["simulate", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_documented_keys_and_vllm_buckets(capsys):
    out = _json(capsys, "--duration", "30", "--rate", "3", "--max-num-batched-tokens", "2112")
    for key in KEYS:
        assert key in out, key
    buckets = out["itl_buckets"]
    assert [b for b, _ in buckets] == [*ITL_BUCKETS_SECONDS[:-1], "+Inf"]
    counts = [c for _, c in buckets]
    assert counts == sorted(counts) and counts[-1] > 0
    assert out["simulated_seconds"] >= 30
    assert out["requests_finished"] > 0 and out["requests_in_flight"] > 0
    # Worked example: a 2,048-token chunk beside the decodes makes steps of up to ~79 ms.
    assert 0.06 < out["itl_p99_seconds"] < 0.08


def test_the_budget_and_disaggregation_move_the_p99(capsys):
    args = ("--duration", "30", "--rate", "3", "--seed", "1")
    big = _json(capsys, *args, "--max-num-batched-tokens", "2048")
    small = _json(capsys, *args, "--max-num-batched-tokens", "512")
    split = _json(capsys, *args, "--max-num-batched-tokens", "2048", "--disaggregated")
    # unchunked, vLLM needs a budget of max_model_len: 4,096 prompt + 256 output tokens
    off = _json(capsys, *args, "--max-num-batched-tokens", "4352", "--no-chunked-prefill")
    assert small["itl_p99_seconds"] < 0.5 * big["itl_p99_seconds"]
    # (TTFT's rise at a small budget needs a full batch: tests/test_scheduler.py checks it.)
    assert split["itl_p99_seconds"] < 0.02
    assert off["itl_p99_seconds"] > big["itl_p99_seconds"]


def test_same_seed_same_answer(capsys):
    a = _json(capsys, "--duration", "10", "--seed", "7")
    b = _json(capsys, "--duration", "10", "--seed", "7")
    assert a == b


def test_human_report_and_exports(capsys, tmp_path):
    prom, om = tmp_path / "scrapes", tmp_path / "run.om"
    code = main(
        ["simulate", "--duration", "30", "--prom-out", str(prom), "--openmetrics-out", str(om)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "ITL" in out and "TTFT" in out and "still in flight" in out
    frame = read_scrape_folder(prom)
    series = histogram_series(frame, "itl")
    # scrapes at 0, 15, 30 s and at 45 s, the first after the last step (it ends past 30 s)
    assert len(series) == 4 and series.counts[-1] > 0
    assert set(frame["model_name"]) == {"meta-llama/Llama-3.1-8B"}
    assert om.read_text().endswith("# EOF\n")


def test_rate_profile_bursts(capsys):
    calm = _json(capsys, "--duration", "60", "--rate-profile", "0:1")
    burst = _json(capsys, "--duration", "60", "--rate-profile", "0:1,20:8,30:1")
    assert burst["requests_arrived"] > calm["requests_arrived"] + 40
    assert burst["ttft_p99_seconds"] > calm["ttft_p99_seconds"]


def test_workload_replay(capsys, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_seconds,prompt_tokens,output_tokens\n0,1000,10\n0.1,2000,20\n0.2,100,5\n"
    )
    out = _json(capsys, "--workload", str(trace), "--duration", "30")
    assert out["requests_finished"] == 3 and out["requests_in_flight"] == 0
    assert out["itl_buckets"][-1][1] == 9 + 19 + 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "h1000"], "unknown GPU 'h1000'"),
        (["--max-num-seqs", "4096", "--max-num-batched-tokens", "2048"], "max_num_seqs"),
        (["--efficiency", "1.5"], "argument --efficiency: '1.5' is not a fraction from 0.001 to 1"),
        (["--workload", "/no/such/file.csv"], "no such workload file"),
        (["--prompt-tokens", "500000"], "could never finish"),
        (["--rate", "-3"], "argument --rate"),
        (["--prompt-tokens", "lognormal:abc"], "argument --prompt-tokens"),
        (["--rate-profile", "5:1"], "argument --rate-profile"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    try:
        code = main(["simulate", "--duration", "5", *args])
    except SystemExit as exc:  # argparse rejects malformed values itself, also with code 2
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1


def test_exports_read_back_every_observation_the_run_reports(capsys, tmp_path):
    # the run's last step ends after the last 15-s grid point within it: the exports add the
    # next scrape, so what `histogram` reads back is what `simulate` reported
    om, folder = tmp_path / "run.om", tmp_path / "scrapes"
    out = _json(capsys, "--duration", "40", "--rate", "3",
                "--openmetrics-out", str(om), "--prom-out", str(folder))  # fmt: skip
    for path in (om, folder):
        assert main(["histogram", str(path), "--json"]) == 0
        read = json.loads(capsys.readouterr().out)
        assert read["count"] == out["itl_observations"] > 0, path.name


def test_the_clients_ttft_includes_the_calibrations_pipeline(tmp_path, capsys):
    # the same run under two calibrations that differ only in the TTFT pipeline (0, then 2
    # steps of the step that gave the first token + 0.1 s): every request's TTFT and e2e move
    # by its own delay, the ITLs not at all, as `simulate --runs` predicts a run's client
    from dataclasses import replace

    from itlkit.physics.calibration import Calibration, write_calibration

    base = Calibration(efficiency=0.8, fitted_on=("x",), name="test")
    paths = {}
    for name, cal in (("none", base), ("pipe", replace(base, ttft_pipeline_steps=2.0,
                                                        ttft_pipeline_seconds=0.1))):  # fmt: skip
        paths[name] = tmp_path / f"{name}.json"
        write_calibration(cal, paths[name])
    values = {}
    for name, path in paths.items():
        assert main(["simulate", "--num-prompts", "30", "--request-rate", "4", "--json",
                     "--prompt-tokens", "512", "--output-tokens", "40",
                     "--calibration", str(path)]) == 0  # fmt: skip
        values[name] = json.loads(capsys.readouterr().out)
    plain, pipe = values["none"], values["pipe"]
    assert plain["ttft_pipeline_mean_seconds"] == 0.0
    # each delay is 0.1 s + 2 steps of ~10-25 ms (Llama 8B on an H100, one prompt in its step)
    delay = pipe["ttft_pipeline_mean_seconds"]
    assert 0.1 + 2 * 0.005 < delay < 0.1 + 2 * 0.1
    assert pipe["ttft_mean_seconds"] == pytest.approx(plain["ttft_mean_seconds"] + delay)
    assert pipe["e2e_mean_seconds"] == pytest.approx(plain["e2e_mean_seconds"] + delay)
    assert pipe["itl_mean_seconds"] == plain["itl_mean_seconds"]
    assert pipe["ttft_buckets"] == plain["ttft_buckets"]  # the engine's histogram


def test_tp_over_pcie_or_a_network_is_slower_than_over_nvlink(capsys):
    # the same TP2 deployment with its all-reduces over each link (uncalibrated: NVLink 300 GB/s
    # and PCIe 32 GB/s one way on the A100, the network 100 Gb/s): per-token ITL in that order
    base = ("--model", "qwen2.5-7b", "--gpu", "a100-80gb-sxm", "--tp", "2", "--duration", "30",
            "--rate", "2")  # fmt: skip
    links = ((), ("--interconnect", "pcie"), ("--interconnect", "network"))
    means = [_json(capsys, *base, *link)["itl_mean_seconds"] for link in links]
    assert means[0] < means[1] < means[2]


def test_a_simulation_without_exports_does_not_import_the_exporters():
    # the simulated hour's whole-process time is the goal; prometheus_client and the
    # exporters are ~50 ms of imports that a run without --prom-out / --openmetrics-out skips
    import subprocess
    import sys

    code = ("import sys, io, contextlib\nfrom itlkit.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['simulate', '--duration', '5', '--json'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', "
            "'itlkit.sim.export'))))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
