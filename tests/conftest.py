"""Shared fixtures: free ports, a throwaway JupyterLab server, headless Chromium, external binaries.

Browser and Prometheus tests need programs from outside pip (Debian's ``chromium``, ``prometheus``).
On a developer machine a missing program skips those tests with the reason; under ``CI=true`` it
fails them, so CI can never pass by skipping the tests that matter.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
ARTIFACTS_DIR = REPO_ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"

# Flags from shared/spec/jupyter-testing.md: Debian's Chromium, headless, nothing phoning home.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAB_START_TIMEOUT_SECONDS = 60.0
REQUIRED_IN_CI = {"browser", "prometheus"}  # markers whose tests may skip locally, never in CI


def require(available: bool, reason: str) -> None:
    """Skip when a program outside pip is missing; fail instead under CI=true."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required, not skipped)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(name="free_port")
def free_port_fixture() -> int:
    return free_port()


@pytest.fixture(scope="session")
def notebooks_dir() -> Path:
    return NOTEBOOKS_DIR


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    return ARTIFACTS_DIR


# --- external programs --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    """Path of the ``prometheus`` server (Debian package ``prometheus``)."""
    found = shutil.which("prometheus")
    require(found is not None, "prometheus not on PATH (apt-get install prometheus)")
    return Path(found)


@pytest.fixture(scope="session")
def promtool_binary() -> Path:
    """Path of ``promtool`` (comes with Debian's ``prometheus`` package)."""
    found = shutil.which("promtool")
    require(found is not None, "promtool not on PATH (apt-get install prometheus)")
    return Path(found)


# --- a JupyterLab server on a copy of notebooks/ ------------------------------------------------


_COPIES = itertools.count(1)  # names of the notebook copies LabServer.lab_url opens


@dataclass(frozen=True)
class LabServer:
    url: str  # http://127.0.0.1:PORT, no trailing slash
    token: str
    root: Path  # the served copy of notebooks/; the repository's notebooks are never opened
    log: Path

    def lab_url(self, notebook: str) -> str:
        """URL that opens a fresh copy of ``notebook`` in a fresh workspace, logged in.

        A copy per call: opening the same file again reattaches to its kernel session, whose
        widget models the new page cannot initialise ("[anywidget] Failed to initialize model",
        "No such comm"), so every test gets its own file, session and kernel."""
        stem = Path(notebook).stem
        fresh = f"{stem}-{next(_COPIES)}.ipynb"
        shutil.copyfile(self.root / notebook, self.root / fresh)
        return f"{self.url}/lab/tree/{fresh}?reset&token={self.token}"


def isolated_jupyter_env(base: Path) -> dict[str, str]:
    """Environment whose Jupyter/IPython dirs live under ``base``, so no user settings leak in."""
    env = dict(os.environ)
    for name, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ]:
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(base / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    return env


@pytest.fixture
def isolated_jupyter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Kernels started by this test see Jupyter/IPython dirs in tmp_path, not the user's."""
    env = isolated_jupyter_env(tmp_path / "jupyter")
    for name in ["JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"]:
        monkeypatch.setenv(name, env[name])
    return env


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _wait_until_ready(proc: subprocess.Popen, url: str, token: str, log: Path) -> None:
    deadline = time.monotonic() + LAB_START_TIMEOUT_SECONDS
    request = urllib.request.Request(
        f"{url}/api/status", headers={"Authorization": f"token {token}"}
    )
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"jupyter lab not ready after {LAB_START_TIMEOUT_SECONDS} s:\n{_tail(log)}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM: the server also shuts its kernels down
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on 127.0.0.1 (free port, known token) serving a copy of notebooks/."""
    from _lab import lab_options  # imports playwright, which only the browser tests need

    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = isolated_jupyter_env(base)
    port, token = free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")  # the venv's, without activating it
    command = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--allow-root",  # CI runs as root
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.password=",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands, see the kernel
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        *lab_options(base),  # JupyterLab's settings as `make lab` gives them: no news toast
    ]
    log = base / "jupyterlab.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_ready(proc, url, token, log)
        yield LabServer(url=url, token=token, root=root, log=log)
    finally:
        _stop(proc)


# --- Playwright with Debian's Chromium ----------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian Chromium driven by Playwright (``playwright install`` is never needed)."""
    require(CHROMIUM.exists(), f"{CHROMIUM} not found (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright not installed (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keep each phase's report on the item, so fixtures can tell whether the test failed.

    Under CI=true a browser or Prometheus test that skips, for whatever reason, fails instead.
    """
    report = yield
    required = [m.name for m in item.iter_markers() if m.name in REQUIRED_IN_CI]
    if IN_CI and report.skipped and required and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI=true: {required[0]} tests must run, not skip ({reason})"
    setattr(item, f"report_{report.when}", report)
    return report


def artifact_name(item: pytest.Item, suffix: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid.split("::", 1)[-1]) + suffix


@pytest.fixture
def page_errors() -> list[str]:
    """Uncaught JavaScript exceptions of the test's page, in order."""
    return []


@pytest.fixture
def console_errors() -> list[str]:
    """``console.error`` messages of the test's page, in order."""
    return []


@pytest.fixture
def page(
    browser,
    page_errors: list[str],
    console_errors: list[str],
    artifacts_dir: Path,
    request: pytest.FixtureRequest,
):
    """A fresh page with bounded timeouts; a failed test leaves a screenshot in test-artifacts/."""
    context = browser.new_context(viewport={"width": 1400, "height": 1400})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.set_default_navigation_timeout(60_000)
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    page.on(
        "console",
        lambda message: console_errors.append(message.text) if message.type == "error" else None,
    )
    try:
        yield page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            try:
                page.screenshot(path=artifacts_dir / artifact_name(request.node, "-failure.png"))
            except Exception as error:  # a crashed page must not hide the test's own failure
                print(f"could not save failure screenshot: {error}", file=sys.stderr)
        context.close()


@pytest.fixture(params=[1280, 1920], ids=lambda w: f"{w}px")
def sized_page(request, browser, page_errors):
    """A page at 1,280 and at 1,920 px wide (the layout checks' two widths), and its width."""
    context = browser.new_context(viewport={"width": request.param, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    yield page, request.param
    context.close()
