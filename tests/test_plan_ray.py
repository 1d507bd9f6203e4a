"""`itlkit plan --ray`: the sweep through a real local Ray cluster (`ray start --head` on
loopback with two worker CPUs), the same answer as the process pool; nothing mocked.

Ray is a dev dependency (Python < 3.14); under CI=true its absence fails instead of skipping.
The cluster is stopped with `ray stop --force`, which stops every Ray process of this machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from itlkit.cli import main
from itlkit.physics.calibration import UNCALIBRATED
from itlkit.plan.prices import PriceTable
from itlkit.plan.space import Slo, Space, Traffic
from itlkit.plan.sweep import run_sweep

if os.environ.get("CI") != "true":
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray>=2.40')")

PRICES = PriceTable({"h100-sxm": 4.0, "a100-80gb-sxm": 2.0}, {}, "test", "test")


def _ray_command() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    # A loopback test cluster without Ray's token authentication (on by default since 2.5x:
    # the head and this process would otherwise need the same token file)
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    port = _free_port()
    start = [_ray_command(), "start", "--head", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats"]  # fmt: skip
    done = subprocess.run(start, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([_ray_command(), "stop", "--force"], capture_output=True, timeout=120)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def test_a_ray_cluster_gives_the_process_pools_answer(cluster):
    space = Space(gpus=("h100-sxm", "a100-80gb-sxm"), tps=(1, 2), max_num_batched_tokens=(2048,))
    kw = dict(model="llama-3.1-8b", traffic=Traffic(4.0, 800, 150, duration_seconds=20),
              slo=Slo(itl_p99_seconds=0.05, ttft_p99_seconds=1.0), prices=PRICES,
              calibration=UNCALIBRATED, calibration_name="none")  # fmt: skip
    pool = run_sweep(space, workers=2, **kw)
    ray = run_sweep(space, ray_address=cluster, **kw)
    assert ray.simulated == pool.simulated == 4
    assert [r.outcome for r in ray.results] == [r.outcome for r in pool.results]


def test_a_ray_address_that_does_not_answer_is_one_line(tmp_path, capsys):
    port = _free_port()  # nothing listens on it
    prices = tmp_path / "prices.json"
    prices.write_text('{"prices": {"h100-sxm": {"per_gpu_hour": 4.0, "source": "test"}}}')
    code = main(["plan", "--rate", "1", "--duration", "5", "--ttft-p99", "5", "--cache", "none",
                 "--calibration", "none", "--prices", str(prices),
                 "--ray", f"127.0.0.1:{port}"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not answer" in err[0]
