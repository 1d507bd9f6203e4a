"""Key press -> redrawn plot, measured in a real JupyterLab page, per notebook's main control.

    .venv/bin/python benchmarks/bench_browser.py [--presses 20]

Starts JupyterLab on a copy of notebooks/ (as the browser tests do), opens each notebook in
headless Debian Chromium at 1,280 px, presses the main slider's arrow key `--presses` times
(right, then back left) and prints the median and p95 from keydown to the figure's new title.
Goals (issue 12): under 150 ms for controls that do not re-simulate, under 300 ms for those that do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' helpers (a script, not the library)

# notebook, figures, main control's handle, what it does
CONTROLS = [
    ("01_decode_floor.ipynb", 1, ".itlkit-batch .noUi-handle", "batch (roofline)"),
    ("02_chunked_prefill.ipynb", 1, ".itlkit-rate .noUi-handle", "arrival rate (re-simulates)"),
    ("03_reading_the_histogram.ipynb", 1, ".itlkit-hist-batch .noUi-handle", "batch (floor)"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=20)
    args = parser.parse_args()

    import pytest  # noqa: F401  (conftest imports it)
    from _lab import open_in_lab, press_and_time
    from conftest import CHROMIUM, CHROMIUM_ARGS, lab_server
    from playwright.sync_api import sync_playwright

    class Factory:  # what the session fixture expects of pytest's tmp_path_factory
        def mktemp(self, name):
            return Path(tempfile.mkdtemp(prefix=f"itlkit-bench-{name}-"))

    server = lab_server.__wrapped__(Factory())
    lab = next(server)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            print(f"{'notebook':34} {'control':30} {'median ms':>9} {'p95 ms':>7} {'n':>3}")
            for notebook, figures, handle, what in CONTROLS:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                open_in_lab(page, lab, notebook, figures=figures)
                times = []
                for i in range(args.presses):
                    key = "ArrowRight" if i < args.presses // 2 else "ArrowLeft"
                    times.append(press_and_time(page, handle, key))
                    page.wait_for_timeout(150)  # let the echo and the kernel settle
                times.sort()
                p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                print(f"{notebook:34} {what:30} {statistics.median(times):9.0f} {p95:7.0f} "
                      f"{len(times):3d}")  # fmt: skip
                page.close()
            browser.close()
    finally:
        server.close()


if __name__ == "__main__":
    main()
