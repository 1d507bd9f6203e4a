"""Where the tests' data lives (tests never read ../shared): their own copies of outside data in
tests/data, and the project's real evidence in the top-level data/ (pages and runs, each with its
provenance)."""

from pathlib import Path

DATA = Path(__file__).parent / "data"
REAL_PAGES = Path(__file__).parents[1] / "data" / "real-pages"
REAL_RUNS = Path(__file__).parents[1] / "data" / "real-runs"
REAL_RUNS_MORE = Path(__file__).parents[1] / "data" / "real-runs-more"
REAL_RUNS_INFERENCEX = Path(__file__).parents[1] / "data" / "real-runs-inferencex"
REAL_RUNS_LLMK8S = Path(__file__).parents[1] / "data" / "real-runs-llmk8s"
BUNDLED_CALIBRATION = Path(__file__).parents[1] / "data" / "calibration.json"
REAL_RUNS_LAMBDA = Path(__file__).parents[1] / "data" / "real-runs-lambda"
REAL_RUNS_DSTACK = Path(__file__).parents[1] / "data" / "real-runs-dstack"
REAL_RUNS_RECIPES = Path(__file__).parents[1] / "data" / "real-runs-recipes"
REAL_RUNS_SCICOM = Path(__file__).parents[1] / "data" / "real-runs-scicom"
MOE_KERNELS = Path(__file__).parents[1] / "data" / "moe-kernels"
