"""`itlkit scrape URL --every 15s --out DIR [--for DURATION]`: save a live /metrics series."""

from __future__ import annotations

import argparse
import sys

from itlkit.errors import ScrapeError
from itlkit.metrics.scrape import (
    MAX_SPAN_SECONDS,
    MAX_TIMEOUT_SECONDS,
    MIN_INTERVAL_SECONDS,
    duration_between,
    scrape_series,
)


def _duration(least_seconds: float, most_seconds: float):
    """An argparse type: a duration (`15s`, `1h30m`, seconds) within the flag's bounds."""

    def parse(text: str) -> float:
        try:
            return duration_between(text, least_seconds=least_seconds, most_seconds=most_seconds)
        except ScrapeError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


_INTERVAL = _duration(MIN_INTERVAL_SECONDS, MAX_SPAN_SECONDS)
_SPAN = _duration(1e-3, MAX_SPAN_SECONDS)
_TIMEOUT = _duration(1e-3, MAX_TIMEOUT_SECONDS)


def add_parser(subparsers) -> None:
    """Register the `scrape` subcommand."""
    p = subparsers.add_parser(
        "scrape",
        help="save timestamped snapshots of a /metrics URL into a folder",
        description=(
            "Scrape a vLLM /metrics URL at a fixed interval into DIR as "
            "metrics-<UTC time>.prom files (readable by `itlkit histogram DIR`). Runs until "
            "Ctrl-C or --for; every written file is complete."
        ),
    )
    p.add_argument("url", metavar="URL", help="e.g. http://localhost:8000/metrics")
    p.add_argument("--every", type=_INTERVAL, default="15s",
                   help="interval, e.g. 15s, 500ms, 1m (default 15s; at least 100ms)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the snapshots")
    p.add_argument("--for", dest="duration", type=_SPAN, default=None, metavar="DURATION",
                   help="stop after this long, e.g. 10m, 1h (default: until Ctrl-C)")  # fmt: skip
    p.add_argument("--timeout", type=_TIMEOUT, default="10s",
                   help="give up on one scrape after this long in all (default 10s; at most "
                        "1d)")  # fmt: skip
    p.add_argument("--append", action="store_true",
                   help="add to a folder that already holds scrapes of another URL")  # fmt: skip
    p.set_defaults(func=run)


def run(args) -> int:
    """Scrape until done or interrupted; print one line per snapshot."""
    written = failed = 0
    try:
        for snap in scrape_series(
            args.url,
            args.out,
            every_seconds=args.every,
            duration_seconds=args.duration,
            timeout_seconds=args.timeout,
            append=args.append,
        ):
            if snap.error:
                failed += 1
                print(f"itlkit scrape: warning: {snap.error}", file=sys.stderr)
            else:
                written += 1
                print(f"{snap.path} ({snap.size_bytes / 1e3:.1f} kB)", flush=True)
    except KeyboardInterrupt:
        print(
            f"itlkit scrape: stopped by Ctrl-C; {written} snapshots in {args.out}"
            + (f", {failed} failed scrapes" if failed else ""),
            file=sys.stderr,
        )
        return 0
    print(
        f"itlkit scrape: done; {written} snapshots in {args.out}"
        + (f", {failed} failed scrapes" if failed else ""),
        file=sys.stderr,
    )
    return 0
