"""Plotly figure builders: pure functions from results to figures, testable without a kernel."""
