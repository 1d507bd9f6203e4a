"""Plotly figure builders: pure functions from results to figures, testable without a kernel.

One module per notebook: `decode`, `scheduler`, `histogram`, `postmortem`, `drill`.
"""

__all__ = ["decode", "drill", "histogram", "postmortem", "scheduler"]
