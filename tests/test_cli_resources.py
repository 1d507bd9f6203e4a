"""Resource limits and impossible numbers in `itlkit simulate`: refused up front, in one line.

Before, `--rate 1e12` and `--duration 1e9` ended in MemoryError tracebacks, `/dev/zero` as a
workload read forever, `--start-unix-seconds 1e20` crashed the export, and an empty workload
exited 0 with "0 requests finished".
"""

from __future__ import annotations

import contextlib
import io

import pytest

from itlkit.cli import main


def _simulate(*args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["simulate", *args])
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # 1e6 req/s x 1e4 s = 1e10 requests at 600 B each: 6,000 GB, over the 4 GB limit.
        (["--rate", "1e6", "--duration", "1e4"], "about 10,000,000,000 requests"),
        (["--duration", "1e7"], "about 50,000,000 requests"),
        (
            ["--rate-profile", "0:1,10:1e6", "--duration", "1e4"],
            "shorten --duration or lower --rate-profile's peak rate",
        ),
        (["--workload", "/dev/zero"], "/dev/zero: is a character device, not a workload file"),
        (["--start-unix-seconds", "1e20", "--prom-out", "unused"], "between 2000 and 2099"),
        # 0.001 req/s for 10 s: the expected 0.01 requests round to none at all.
        (
            ["--rate", "0.001", "--duration", "10"],
            "--rate 0.001 requests/s sends no request within --duration 10 s",
        ),
    ],
)
def test_refused_in_one_line_before_any_work(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _simulate(*args)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "unused").exists()


def test_an_ordinary_run_is_not_refused():
    code, err = _simulate("--duration", "10", "--rate", "1", "--json")
    assert code == 0, err
