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

from itlkit.errors import ScrapeError, SourceError
from itlkit.metrics.http_get import (
    MAX_DEADLINE_SECONDS,
    HttpGetError,
    checked_url,
    http_get,
    one_line,
    shown_url,
)
from itlkit.metrics.scrape_names import scrape_file_name

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}
_DURATION_HINT = "e.g. 15s, 500ms, 2m, 1h30m or a number of seconds"

MIN_INTERVAL_SECONDS = (
    0.1  # a vLLM page takes milliseconds to render; faster, the scraper is the load
)
MAX_SPAN_SECONDS = 365 * 86_400.0  # an interval or a run of a year; longer overflows sleep timers
MAX_TIMEOUT_SECONDS = MAX_DEADLINE_SECONDS  # a day for one scrape
MAX_PAGE_BYTES = 32_000_000  # a vLLM page is tens of kB; a fleet's federated page a few MB
SOURCE_FILE = ".itlkit-scrape-source"  # the URL a folder's scrapes came from


@dataclass(frozen=True)
class Snapshot:
    """One scrape attempt: when, where it was written, or why it failed."""

    timestamp_seconds: float
    path: Path | None
    size_bytes: int
    error: str | None = None


def _seconds_in(text: str) -> float:
    """The number of seconds `text` writes (any sign, inf or NaN); ScrapeError for other text."""
    raw = str(text).strip()
    try:
        return float(raw)
    except ValueError:
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise ScrapeError(
                f"{one_line(text, 40)!r} is not a duration: use {_DURATION_HINT}"
            ) from None
        return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def parse_duration_seconds(text: str) -> float:
    """Seconds in a Prometheus-style duration: `15s`, `500ms`, `2m`, `1h30m`, or plain seconds."""
    value = _seconds_in(text)
    if not (value > 0 and math.isfinite(value)):
        raise ScrapeError(f"{one_line(text, 40)!r} is not a positive time: use {_DURATION_HINT}")
    return value


def format_duration(seconds: float) -> str:
    """`seconds` in the largest unit that holds it whole: 0.1 -> `100ms`, 86400 -> `1d`."""
    for unit, size in _UNIT_SECONDS.items():
        count = seconds / size
        if count >= 1 and abs(count - round(count)) < 1e-9:
            return f"{round(count)}{unit}"
    return f"{seconds:g}s"


def duration_between(text: str, *, least_seconds: float, most_seconds: float) -> float:
    """`parse_duration_seconds`, refused outside [least_seconds, most_seconds] with both named."""
    value = _seconds_in(text)
    if not least_seconds <= value <= most_seconds:  # NaN and inf fail here
        raise ScrapeError(
            f"{one_line(text, 40)!r} is not a duration from {format_duration(least_seconds)} to "
            f"{format_duration(most_seconds)}"
        )
    return value


def _page_problem(text: str, url: str) -> str | None:
    """Why a 200 answer is not a Prometheus text page that itlkit reads back, or None."""
    start = text.lstrip()[:1]
    if not start:
        return "answered with an empty page, not Prometheus metrics"
    if start == "<":
        return "answered with an HTML page, not Prometheus metrics text (is the path /metrics?)"
    if start in "{[":
        return "answered with JSON, not Prometheus metrics text (is the path /metrics?)"
    if all(not line.strip() or line.startswith("#") for line in text.splitlines()):
        return "answered with a page of comments only, no samples"
    from itlkit.metrics.readers import parse_prometheus_text  # pandas: only once a page came

    try:
        parse_prometheus_text(text, source=url)
    except SourceError as exc:
        detail = str(exc).removeprefix(f"{url}:")
        return f"the page is not Prometheus metrics text that itlkit can read: line {detail}"
    return None


def fetch_metrics(
    url: str, *, timeout_seconds: float = 10.0, max_bytes: int = MAX_PAGE_BYTES
) -> str:
    """GET one Prometheus text page within `timeout_seconds` in all, at most `max_bytes` long.

    A page is returned only when it reads back as `itlkit.metrics.readers` reads a saved one:
    HTML, JSON, empty, cut-off or malformed answers are refused with the reason.
    """
    where = shown_url(url)
    headers = {"Accept": "text/plain;version=0.0.4"}
    try:
        body = http_get(url, deadline_seconds=timeout_seconds, max_bytes=max_bytes,
                        headers=headers)  # fmt: skip
    except HttpGetError as exc:
        raise ScrapeError(f"{where}: {exc}") from None
    if body[:2] == b"\x1f\x8b":
        raise ScrapeError(
            f"{where}: answered with gzip-compressed data, which itlkit did not ask for"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScrapeError(f"{where}: the page is not UTF-8 text (byte 0x{body[exc.start]:02x} at "
                          f"offset {exc.start:,})") from None  # fmt: skip
    if problem := _page_problem(text, url):
        raise ScrapeError(f"{where}: {problem}")
    return text


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


def _check_timing(every_seconds, duration_seconds, timeout_seconds) -> None:
    if not MIN_INTERVAL_SECONDS <= every_seconds <= MAX_SPAN_SECONDS:
        raise ScrapeError(f"the interval must be from {MIN_INTERVAL_SECONDS:g} to "
                          f"{MAX_SPAN_SECONDS:g} s, got {every_seconds!r}")  # fmt: skip
    if duration_seconds is not None and not 0 <= duration_seconds <= MAX_SPAN_SECONDS:
        raise ScrapeError(f"the duration must be from 0 to {MAX_SPAN_SECONDS:g} s, "
                          f"got {duration_seconds!r}")  # fmt: skip
    if not 0 < timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise ScrapeError(f"the timeout must be above 0 and at most {MAX_TIMEOUT_SECONDS:g} s, "
                          f"got {timeout_seconds!r}")  # fmt: skip


def _make_folder(folder: Path) -> None:
    """Create the output folder; why not, in words, when it cannot be."""
    where = one_line(str(folder))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ScrapeError(f"{where}: is a file, not a folder for the snapshots") from None
    except NotADirectoryError:
        blocker = next((p for p in folder.parents if p.exists() and not p.is_dir()), None)
        raise ScrapeError(f"{where}: cannot be created: {one_line(str(blocker))} is a file, "
                          "not a folder") from None  # fmt: skip
    except PermissionError:
        raise ScrapeError(f"{where}: no permission to create this folder") from None
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        raise ScrapeError(f"{where}: cannot create the output folder ({why})") from None
    if not folder.is_dir():
        raise ScrapeError(f"{where}: not a folder")


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists() or path.is_symlink():
            break
        missing.append(path)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (deepest first) while they are empty."""
    for path in folders:
        try:
            path.rmdir()
        except OSError:
            return


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
    _check_timing(every_seconds, duration_seconds, timeout_seconds)
    try:
        checked_url(url)  # a malformed URL fails before any folder is made
    except HttpGetError as exc:
        raise ScrapeError(f"{shown_url(url)}: {exc}") from None
    folder = Path(folder)
    made = _missing_folders(folder)  # removed again if the first scrape fails
    _make_folder(folder)
    start = clock()
    end = math.inf if duration_seconds is None else start + duration_seconds
    slot = 0
    while True:
        when = clock()
        try:
            text = fetch_metrics(url, timeout_seconds=timeout_seconds)
        except ScrapeError as exc:
            if slot == 0:
                _remove_empty(made)  # a failed command leaves nothing behind
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
