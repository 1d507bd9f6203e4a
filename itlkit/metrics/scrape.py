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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from itlkit.errors import ScrapeError
from itlkit.metrics.http_get import HttpGetError, HttpStatusError, http_get
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


MAX_PAGE_BYTES = 32_000_000  # a vLLM page is tens of kB; a fleet's federated page a few MB
SOURCE_FILE = ".itlkit-scrape-source"  # the URL a folder's scrapes came from


def fetch_metrics(
    url: str, *, timeout_seconds: float = 10.0, max_bytes: int = MAX_PAGE_BYTES
) -> str:
    """GET one Prometheus text page within `timeout_seconds` in all, at most `max_bytes` long."""
    if not re.match(r"https?://", url):
        raise ScrapeError(f"{url}: only http:// and https:// URLs can be scraped")
    headers = {"Accept": "text/plain;version=0.0.4"}
    try:
        body = http_get(url, deadline_seconds=timeout_seconds, max_bytes=max_bytes,
                        headers=headers)  # fmt: skip
    except HttpStatusError as exc:
        raise ScrapeError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except HttpGetError as exc:
        raise ScrapeError(f"{url}: {exc}") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ScrapeError(f"{url}: the page is not UTF-8 text") from None


def claim_folder(folder: Path, url: str, *, append: bool) -> None:
    """Make `folder` the home of `url`'s scrapes; refuse one that holds another series.

    Pages of two servers in one folder read back as one series whose counters jump between
    them, so a folder that already holds scrapes takes more only from the same URL, or when
    the user says `append`.
    """
    marker = folder / SOURCE_FILE
    existing = sorted(folder.glob("metrics-*.prom"))
    if existing and not append:
        owner = marker.read_text().strip() if marker.is_file() else None
        if owner != url:
            where = f"from {owner}" if owner else "of unknown origin"
            raise ScrapeError(
                f"{folder}: already holds {len(existing)} scrapes {where}; choose an empty "
                "folder, or pass --append to add to them"
            )
    if not marker.is_file():
        marker.write_text(url + "\n")


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
    append: bool = False,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Snapshot]:
    """Scrape `url` every `every_seconds` into `folder`, yielding each attempt, until stopped.

    The first scrape must succeed (a wrong URL fails at once); later failures are yielded with
    their error and the series goes on. A folder holding another URL's scrapes is refused
    unless `append`. Scrapes keep to a fixed grid; slots missed while a slow
    scrape ran are skipped, not bunched.
    """
    if not every_seconds > 0:
        raise ScrapeError(f"the interval must be positive, got {every_seconds!r}")
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScrapeError(f"{folder}: cannot create the output folder ({exc})") from None
    if not folder.is_dir():
        raise ScrapeError(f"{folder}: not a folder")
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
            if slot == 0:
                claim_folder(folder, url, append=append)
            path = write_snapshot(folder, text, timestamp_seconds=when)
            yield Snapshot(when, path, len(text.encode("utf-8")))
        slot = max(slot + 1, math.floor((clock() - start) / every_seconds) + 1)
        next_time = start + slot * every_seconds
        if next_time > end:
            return
        pause = next_time - clock()
        if pause > 0:
            sleep(pause)
