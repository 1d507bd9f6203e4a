"""vLLM's metrics: their names, Prometheus histograms, and reading them from where users keep them.

- `vllm_metrics`: metric names across vLLM versions, default buckets (`METRICS`, `metric`).
- `histogram`: classic histograms, Prometheus-exact quantiles (`Histogram`, `summarize`).
- `exposition`: writing vLLM-format `/metrics` pages (`render_vllm_metrics`).
- `scrape_names`: the UTC time in a scrape file's name (`timestamp_from_name`, `scrape_file_name`).
- `readers`: pages, folders, bench JSON into one tidy table (`read_paths`, `read_scrape_folder`).
- `series`: the tidy table as histogram snapshots and series (`histogram_series`, `scalar_series`).
- `scrape`: a live `/metrics` URL into a folder of snapshots (`scrape_series`).
- `prometheus_api`: a Prometheus server's HTTP API (`query_range`, `fetch_bucket_rates`).

This package imports none of its modules, so reading one page's names costs no pandas import.
"""

__all__ = [
    "exposition",
    "histogram",
    "prometheus_api",
    "readers",
    "scrape",
    "scrape_names",
    "series",
    "vllm_metrics",
]
