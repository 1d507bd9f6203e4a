"""Scrape a live `/metrics` URL into a folder of timestamped snapshots.

Each snapshot is written whole (to a hidden temporary file, then renamed), so stopping at any
moment (Ctrl-C) leaves only complete pages. File names carry the UTC scrape time in the form
`itlkit.metrics.readers` reads back (`metrics.scrape_names`): `metrics-20261202T152436.250Z.prom`.
"""

from __future__ import annotations

import math
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from itlkit.errors import ScrapeError
from itlkit.metrics.scrape_names import scrape_file_name

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Snapshot:
    """One scrape attempt: when, where it was written, or why it failed."""

    timestamp_seconds: float
    path: Path | None
    size_bytes: int
    error: str | None = None


def parse_duration_seconds(text: str) -> float:
    """Seconds in a Prometheus-style duration: `15s`, `500ms`, `2m`, `1h30m`, or plain seconds."""
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise ScrapeError(
                f"bad duration {text!r}: use e.g. 15s, 500ms, 2m, 1h30m or a number of seconds"
            ) from None
        value = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not (value > 0 and math.isfinite(value)):
        raise ScrapeError(f"bad duration {text!r}: must be a positive time")
    return value


def fetch_metrics(url: str, *, timeout_seconds: float = 10.0) -> str:
    """GET one Prometheus text page; errors tell unreachable, silent and failing URLs apart."""
    if not re.match(r"https?://", url):
        raise ScrapeError(f"{url}: only http:// and https:// URLs can be scraped")
    request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise ScrapeError(f"{url}: no answer within {timeout_seconds:g} s") from None
        raise ScrapeError(f"{url}: cannot reach ({exc.reason})") from None
    except TimeoutError:
        raise ScrapeError(f"{url}: no answer within {timeout_seconds:g} s") from None
    except (ConnectionError, OSError) as exc:
        raise ScrapeError(f"{url}: connection failed ({exc})") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ScrapeError(f"{url}: the page is not UTF-8 text") from None


def write_snapshot(folder, text: str, *, timestamp_seconds: float) -> Path:
    """Write one page as `metrics-<UTC time>.prom`, whole or not at all."""
    folder = Path(folder)
    path = folder / scrape_file_name(timestamp_seconds)
    partial = folder / f".{path.name}.partial"
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()
    return path


def scrape_series(
    url: str,
    folder,
    *,
    every_seconds: float,
    duration_seconds: float | None = None,
    timeout_seconds: float = 10.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Snapshot]:
    """Scrape `url` every `every_seconds` into `folder`, yielding each attempt, until stopped.

    The first scrape must succeed (a wrong URL fails at once); later failures are yielded with
    their error and the series goes on. Scrapes keep to a fixed grid; slots missed while a slow
    scrape ran are skipped, not bunched.
    """
    if not every_seconds > 0:
        raise ScrapeError(f"the interval must be positive, got {every_seconds!r}")
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScrapeError(f"{folder}: cannot create the output folder ({exc})") from None
    start = clock()
    end = math.inf if duration_seconds is None else start + duration_seconds
    slot = 0
    while True:
        when = clock()
        try:
            text = fetch_metrics(url, timeout_seconds=timeout_seconds)
        except ScrapeError as exc:
            if slot == 0:
                raise
            yield Snapshot(when, None, 0, str(exc))
        else:
            path = write_snapshot(folder, text, timestamp_seconds=when)
            yield Snapshot(when, path, len(text.encode("utf-8")))
        slot = max(slot + 1, math.floor((clock() - start) / every_seconds) + 1)
        next_time = start + slot * every_seconds
        if next_time > end:
            return
        pause = next_time - clock()
        if pause > 0:
            sleep(pause)
