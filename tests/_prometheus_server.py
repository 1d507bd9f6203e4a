"""A real Prometheus over a backfilled TSDB, for tests (recipe: shared/spec/prometheus-testing.md).

`backfilled_prometheus(root, openmetrics_text, prometheus=..., promtool=...)` builds blocks with
`promtool tsdb create-blocks-from openmetrics`, serves them on 127.0.0.1 on a free port, yields the
base URL and stops the server on exit.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _create_blocks(promtool: Path, openmetrics_path: Path, data: Path) -> None:
    built = subprocess.run(
        [str(promtool), "tsdb", "create-blocks-from", "openmetrics", str(openmetrics_path),
         str(data)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if built.returncode != 0:
        raise RuntimeError(f"promtool failed: {built.stderr[-2000:]}{built.stdout[-2000:]}")


@contextlib.contextmanager
def _serve(root: Path, *, prometheus: Path, ready_seconds: float) -> Iterator[str]:
    """Prometheus over the blocks in `root/data` on a free port until the block exits."""
    (root / "prometheus.yml").write_text("global: {}\nscrape_configs: []\n")
    port = _free_port()
    with open(root / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [str(prometheus), f"--config.file={root / 'prometheus.yml'}",
             f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=100y"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, proc, root / "prometheus.log", time.monotonic() + ready_seconds)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("prometheus did not become ready:\n" + log.read_text()[-4000:])
        time.sleep(0.2)


@contextlib.contextmanager
def backfilled_prometheus(
    root: Path, openmetrics_text: str, *, prometheus: Path, promtool: Path
) -> Iterator[str]:
    """Serve the OpenMetrics text from a throwaway TSDB; yields http://127.0.0.1:PORT."""
    (root / "in.om").write_text(openmetrics_text)
    _create_blocks(promtool, root / "in.om", root / "data")
    with _serve(root, prometheus=prometheus, ready_seconds=60) as url:
        yield url


def merge_openmetrics(texts_by_instance: dict[str, str]) -> str:
    """One OpenMetrics text from several single-target ones, each sample labelled `instance`.

    Backfill wants each family declared once with all its samples under it, so the families of
    every text are gathered in the order of the first text; a text's own `# EOF` is dropped.
    """
    families: dict[str, list[str]] = {}
    headers: dict[str, list[str]] = {}
    for instance, text in texts_by_instance.items():
        family = None
        label = f'instance="{instance}"'
        for line in text.splitlines():
            if line == "# EOF" or not line:
                continue
            if line.startswith("# "):
                family = line.split()[2]
                if family not in families:
                    families[family] = []
                    headers[family] = []
                if len(headers[family]) < 2 and line not in headers[family]:
                    headers[family].append(line)
                continue
            name, brace, rest = line.partition("{")
            if not brace:
                name, _, rest = line.partition(" ")
            sample = f"{name}{{{label},{rest}" if brace else f"{name}{{{label}}} {rest}"
            families[family].append(sample)
    lines = [line for f, samples in families.items() for line in (*headers[f], *samples)]
    return "\n".join([*lines, "# EOF"]) + "\n"


@contextlib.contextmanager
def served_openmetrics_file(
    root: Path, openmetrics_path: Path, *, prometheus: Path, promtool: Path
) -> Iterator[str]:
    """`backfilled_prometheus` for an OpenMetrics file too big to hold as one string; the blocks
    in `root/data` are reused when they exist (a benchmark's cache)."""
    if not (root / "data").is_dir() or not any((root / "data").iterdir()):
        _create_blocks(promtool, openmetrics_path, root / "data")
    with _serve(root, prometheus=prometheus, ready_seconds=300) as url:
        yield url


def exported_incident(root: Path, scenario) -> tuple[int, str]:
    """A scenario simulated once and exported twice: scrapes in `root/scrapes`, and the
    OpenMetrics text to backfill. Returns (its start, Unix seconds, inside the TSDB's
    head-free past; the text)."""
    from itlkit.sim.export import export_prometheus_scrapes, render_openmetrics
    from itlkit.sim.scenarios import run_scenario

    start = (int(time.time()) // 3600 - 3) * 3600
    result = run_scenario(scenario)
    export_prometheus_scrapes(
        result, root / "scrapes", interval_seconds=15, start_unix_seconds=start,
        model_name=scenario.model,
    )  # fmt: skip
    text = render_openmetrics(
        result, interval_seconds=15, start_unix_seconds=start, model_name=scenario.model
    )
    return start, text
