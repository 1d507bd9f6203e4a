"""`itlkit simulate` and `itlkit calibrate` on bad input: one line that names the flag (or the
file and line, or the request) and what would be right, refused before the long work.

The cases come from the bad-input hunt: denormal and huge flag values that reached numpy
('expected non-negative integer', an OverflowError, a RuntimeWarning), length and profile
errors without their flag or in Python's words ('could not convert string to float', 'not
enough values to unpack'), a 'no request finished' hint that blamed the prompt or --duration
when --efficiency or --kv-transfer-bandwidth made the steps slow, OSError text for output
paths ('[Errno 17] File exists'), and a KV error that named no request.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from _paths import REAL_RUNS

from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.physics.calibration import UNCALIBRATED, write_calibration
from itlkit.sim.lengths import Fixed, LogNormal, Sampled, Uniform
from itlkit.sim.workload import make_workload, read_vllm_bench_result, synthetic_workload

RUNS = REAL_RUNS / "real_runs_trainval.json"


def _cli(*argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(map(str, argv)))
        except SystemExit as exc:  # argparse refuses a flag's value itself, also with code 2
            code = exc.code
    return code, err.getvalue()


def _refused(*argv) -> str:
    code, err = _cli(*argv)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--efficiency", "1e-320"],
         "argument --efficiency: '1e-320' is not a fraction from 0.001 to 1"),
        (["--host-overhead", "1e308"],
         "argument --host-overhead: '1e308' is not a number of seconds from 0 to 1"),
        (["--rate", "1e-320"],
         "argument --rate: '1e-320' is not an arrival rate in requests/s from 1e-06"),
        (["--duration", "1e-320"],
         "argument --duration: '1e-320' is not a number of seconds from 0.001"),
        (["--kv-transfer-bandwidth", "1e-300"],
         "argument --kv-transfer-bandwidth: '1e-300' is not a bandwidth in bytes/s from 1e+06"),
        (["--scrape-interval", "1e-300"],
         "argument --scrape-interval: '1e-300' is not a number of seconds from 0.001"),
        (["--seed", "-1"], "argument --seed: '-1' is not a seed from 0 to 4,294,967,295"),
        (["--shared-prefix-tokens", "1" + "0" * 20],
         "argument --shared-prefix-tokens: '100000000000000000000' is not a number of tokens "
         "from 0"),
        (["--prompt-tokens", "1" + "0" * 20],
         "argument --prompt-tokens: '100000000000000000000' is not a number of tokens from 1 to "
         "100,000,000"),
        (["--prompt-tokens", "uniform:100:10"],
         "argument --prompt-tokens: 'uniform:100:10': uniform lengths need low <= high, got LOW "
         "100 > HIGH 10"),
        (["--output-tokens", "lognormal:0:1"],
         "argument --output-tokens: 'lognormal:0:1': the lognormal MEDIAN must be a number of "
         "tokens from 1 to 100,000,000, got 0.0"),
        (["--output-tokens", "lognormal:100:1e308"],
         "argument --output-tokens: 'lognormal:100:1e308': the lognormal SIGMA must be a number "
         "from 0 to 3"),
        (["--prompt-tokens", "lognormal:a:b"],
         "argument --prompt-tokens: 'a' in 'lognormal:a:b' is not a number"),
        (["--prompt-tokens", "lognormal:1"],
         "'lognormal:1' is not N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA"),
        (["--rate-profile", "0:fast"],
         "argument --rate-profile: 'fast' is not an arrival rate in requests/s"),
        (["--rate-profile", "0:2,60"],
         "argument --rate-profile: '60' in '0:2,60' is not START:RATE"),
        (["--rate-profile", "0:1:2"], "argument --rate-profile: '0:1:2' is not START:RATE"),
        (["--rate-profile", "5:1"],
         "argument --rate-profile: '5:1': rate profile start times must begin at 0"),
        (["--rate-profile", "0:1e308"], "argument --rate-profile: '1e308' is not an arrival rate"),
        (["--rate-profile", "0:0"], "--rate-profile 0:0 sends no request within --duration 5 s"),
    ],
)  # fmt: skip
def test_flags_are_refused_with_their_name_and_range(args, expected):
    assert expected in _refused("simulate", "--duration", "5", *args)


def test_calibrate_refuses_a_negative_seed_before_fitting():
    err = _refused("calibrate", RUNS, "--seed", "-1")
    assert "argument --seed: '-1' is not a seed from 0 to 4,294,967,295" in err


# ---- no request finished: say which setting made the steps slow --------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--efficiency", "0.001"], "(--efficiency 0.001 makes each step 1,000x the roofline's)"),
        (["--host-overhead", "1"], "(--host-overhead adds 1.00 s to each step)"),
        (["--mfu", "0.001"], "(--mfu 0.001 makes prefill compute 500x slower than at 0.5)"),
        # a budget of 1 token: 4,096 prefill steps before the first decode
        (["--max-num-batched-tokens", "1", "--max-num-seqs", "1"],
         "--max-num-batched-tokens 1 cuts its 4,096-token prompt into 4,096 steps"),
        # 4,096 tokens x 131,072 B of KV at 1 MB/s: 537 s before the decode instance has it
        (["--disaggregated", "--kv-transfer-bandwidth", "1e6"],
         "none ran (its KV transfer takes 536.9 s at --kv-transfer-bandwidth 1e+06 B/s)"),
    ],
)  # fmt: skip
def test_no_request_finished_names_the_setting_that_slowed_the_steps(args, expected):
    err = _refused("simulate", "--duration", "5", *args)
    assert err.startswith("itlkit simulate: error: no request finished: none of its ")
    assert expected in err
    assert "longer than the KV cache" not in err


# ---- vLLM without chunked prefill ------------------------------------------------------------


def test_unchunked_prefill_needs_a_budget_that_holds_every_request():
    # vLLM's SchedulerConfig.verify_max_model_len: without chunked prefill the budget must be at
    # least max_model_len, which must hold prompt + output (4,096 + 256)
    err = _refused("simulate", "--duration", "5", "--no-chunked-prefill",
                   "--max-num-batched-tokens", "100")  # fmt: skip
    assert "has 4,352 tokens (prompt 4,096 + output 256); raise --max-num-batched-tokens" in err
    assert "from 100 to 4,352, or leave chunked prefill on" in err


# ---- output paths, checked before the simulation -------------------------------------------


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if the simulator is reached: the refusal must come first."""
    import itlkit.sim.scheduler

    def refuse(*args, **kwargs):
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr(itlkit.sim.scheduler, "simulate_deployment", refuse)


def test_output_paths_are_refused_before_simulating(tmp_path, no_simulation):
    a_file = tmp_path / "a.txt"
    a_file.write_text("x")
    cases = [
        (["--prom-out", a_file], f"--prom-out {a_file}: is a file, not a folder for the scrapes"),
        (["--prom-out", a_file / "sub"],
         f"--prom-out {a_file / 'sub'}: {a_file} is a file, so nothing can be created under it"),
        (["--openmetrics-out", tmp_path],
         f"--openmetrics-out {tmp_path}: is a folder; give the name of a file to write"),
        # 60 s at 1 ms: 60,001 files
        (["--prom-out", tmp_path / "s", "--scrape-interval", "0.001"],
         "--scrape-interval 0.001 s over a 60-s run would write 60,001 scrapes; at most 20,000: "
         "give an interval of at least 0.003 s"),
    ]  # fmt: skip
    for args, expected in cases:
        assert expected in _refused("simulate", *args)


def test_a_folder_with_earlier_scrapes_is_refused(tmp_path, no_simulation):
    (tmp_path / "metrics-20261202T150000.000Z.prom").write_text("")
    err = _refused("simulate", "--prom-out", tmp_path)
    assert "already holds 1 scrapes (metrics-*.prom) of an earlier export" in err


def test_openmetrics_out_creates_missing_folders_as_prom_out_does(tmp_path):
    path = tmp_path / "new" / "deeper" / "run.om"
    code, err = _cli("simulate", "--duration", "5", "--openmetrics-out", path)
    assert code == 0, err
    assert path.read_text().endswith("# EOF\n")


def test_calibrate_refuses_its_output_before_the_fit(tmp_path):
    err = _refused("calibrate", RUNS, "-o", tmp_path)  # progress lines would come first
    assert err == (
        f"itlkit calibrate: error: -o/--output {tmp_path}: is a folder; give the name of a "
        "file to write\n"
    )


def test_write_calibration_says_what_stops_it(tmp_path):
    a_file = tmp_path / "a.txt"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=r"a.txt/c.json: cannot write the calibration there \("):
        write_calibration(UNCALIBRATED, a_file / "c.json")
    write_calibration(UNCALIBRATED, tmp_path / "new" / "c.json")
    assert json.loads((tmp_path / "new" / "c.json").read_text())["efficiency"] == 1.0


# ---- a request too long for the KV cache is named where the user can find it ------------------


def test_a_request_longer_than_the_kv_cache_is_named_by_its_csv_line(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_seconds,prompt_tokens,output_tokens\n0,100,10\n0.2,5000000,10\n")
    err = _refused("simulate", "--workload", trace)
    assert f"{trace}:3 (arriving at 0.200 s) needs 5,000,010 KV tokens (prompt 5,000,000 + " in err
    # the H100's KV cache as vLLM sizes it (tests/test_scheduler.py derives it): 456,512 tokens
    assert "but the KV cache holds 456,512: it could never finish; shorten it, or give" in err


def test_a_synthetic_request_longer_than_the_kv_cache_is_named_by_its_arrival():
    err = _refused("simulate", "--duration", "5", "--seed", "1", "--prompt-tokens", "500000")
    assert "the request arriving at " in err
    assert "more) needs 500,256 KV tokens (prompt 500,000 + output 256)" in err


def test_a_bench_request_longer_than_the_kv_cache_is_named_by_its_index(tmp_path):
    path = tmp_path / "bench.json"
    doc = {"input_lens": [100, 900_000], "output_lens": [10, 10], "request_rate": "inf",
           "completed": 2}  # fmt: skip
    path.write_text(json.dumps(doc))
    err = _refused("simulate", "--workload", path)
    assert f"{path}: request input_lens[1] (arriving at 0.000 s) needs 900,010 KV tokens" in err


def test_a_bench_file_with_nothing_to_replay_says_so(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"input_lens": [0, 0], "output_lens": [5, 5], "completed": 2,
                                "request_rate": "inf"}))  # fmt: skip
    with pytest.raises(ConfigError, match=r"none of its 2 requests can be replayed \(each has"):
        read_vllm_bench_result(path)


def test_a_bench_rate_that_spreads_the_requests_over_centuries_is_refused(tmp_path):
    # without start times the replay redraws Poisson arrivals at request_rate: 1e-300/s put
    # every request after the first beyond any --duration, and the run reported one request
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"input_lens": [100, 100], "output_lens": [5, 5], "completed": 2,
                                "request_rate": 1e-300}))  # fmt: skip
    with pytest.raises(ConfigError, match=r"request_rate 1e-300 requests/s spreads its 2 "):
        read_vllm_bench_result(path)


# ---- the library's lengths: bounded when made, not when sampled -------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Fixed(10**20), "a fixed length must be from 1 to 100,000,000 tokens"),
        (lambda: Fixed(0), "a fixed length must be from 1"),
        (lambda: Uniform(1, 10**20), "uniform HIGH must be from 1 to 100,000,000 tokens"),
        (lambda: LogNormal(1e308, 1.0), "lognormal MEDIAN must be a number of tokens from 1"),
        (lambda: LogNormal(100.0, float("nan")), "lognormal SIGMA must be a number from 0 to 3"),
        (lambda: Sampled((5, 10**20)), "a sampled length must be from 1 to 100,000,000"),
        (lambda: synthetic_workload(duration_seconds=1, rate_per_second=1,
                                    shared_prefix_tokens=10**20),
         "shared prefix tokens must be from 0 to 100,000,000"),
        (lambda: make_workload(arrival_seconds=[0.0], prompt_tokens=[10**20], output_tokens=1),
         "workload prompt_tokens holds a number too large to count"),
    ],
)  # fmt: skip
def test_lengths_beyond_any_request_are_refused_when_made(make, message):
    with pytest.raises(ConfigError, match=message):
        make()
