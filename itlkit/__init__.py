"""itlkit: decompose LLM inter-token latency.

The subpackages are layers, each importing only those before it:
`physics` (GPUs, models, the roofline step time) → `metrics` (vLLM's metrics, histograms, readers)
→ `sim` (the scheduler simulator) → `diagnosis` (causes from metrics) → `drill` (the interview
drill) → `plan` (the cheapest deployment that meets the SLOs) → `plots` → `widgets` (notebooks)
and `cli` (the `itlkit` command).

Importing a package imports none of its modules: `import itlkit.physics.roofline` loads numpy,
not pandas or plotly.
"""

# `plots` and `widgets` need the notebooks extra (plotly, ipywidgets): a star import skips them.
__all__ = [
    "__version__",
    "bundled",
    "cli",
    "diagnosis",
    "drill",
    "errors",
    "metrics",
    "physics",
    "plan",
    "sim",
    "units",
]


def __getattr__(name: str):
    # Reading the installed metadata costs tens of milliseconds: do it only when asked.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("itlkit")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
