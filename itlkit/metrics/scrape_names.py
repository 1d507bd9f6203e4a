"""The naming scheme of scrape files: each carries its UTC scrape time in its name.

Every file whose name ends in `.prom`, `.txt` or `.metrics` is one scrape and carries an ISO 8601
timestamp, basic or extended, e.g. `metrics-20261202T152436.250Z.prom` or `2026-12-02T15:24:36Z.txt`
(a name without a zone is read as UTC). `itlkit scrape` and the simulator's exports write the
basic form (`scrape_file_name`); `metrics.readers` reads any of them back.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from pathlib import Path

from itlkit.errors import SourceError

SCRAPE_SUFFIXES = (".prom", ".txt", ".metrics")

_ISO_IN_NAME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})T(\d{2})[:\-]?(\d{2})[:\-]?(\d{2})(\.\d+)?(Z|[+\-]\d{2}:?\d{2})?"
)


def _invalid_because(year, month, day, hour, minute, second, zone) -> str | None:
    """Why these fields are not a time, in words; None when they are one."""
    if not 1 <= year <= 9999:
        return f"year {year:04d} is not from 0001 to 9999"
    if not 1 <= month <= 12:
        return f"month {month:02d} is not from 01 to 12"
    last_day = calendar.monthrange(year, month)[1]
    if not 1 <= day <= last_day:
        return f"day {day:02d} is not in {year:04d}-{month:02d}, which has {last_day} days"
    if hour > 23 or minute > 59 or second > 59:
        return f"{hour:02d}:{minute:02d}:{second:02d} is not a time of day"
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        if int(digits[:2]) > 23 or int(digits[2:]) > 59:
            return f"zone {zone} is not a UTC offset from -23:59 to +23:59"
    return None


def timestamp_from_name(name: str) -> float | None:
    """Seconds since the epoch from an ISO 8601 timestamp inside a file name (UTC if no zone)."""
    m = _ISO_IN_NAME.search(Path(name).name)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction = float(m.group(7)) if m.group(7) else 0.0
    zone = m.group(8)
    if why := _invalid_because(year, month, day, hour, minute, second, zone):
        raise SourceError(
            f"{name}: the file name's timestamp {m.group(0)} is not a valid time ({why})"
        )
    tz = dt.UTC
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    when = dt.datetime(year, month, day, hour, minute, second, tzinfo=tz)
    return when.timestamp() + fraction


def timestamp_to_name(timestamp_seconds: float) -> str:
    """The basic ISO 8601 form `YYYYMMDDTHHMMSS.mmmZ` used for scrape file names."""
    when = dt.datetime.fromtimestamp(timestamp_seconds, tz=dt.UTC)
    return when.strftime("%Y%m%dT%H%M%S.") + f"{when.microsecond // 1000:03d}Z"


def scrape_file_name(timestamp_seconds: float) -> str:
    """`metrics-<UTC time>.prom`, the name of one scrape taken at `timestamp_seconds`."""
    return f"metrics-{timestamp_to_name(timestamp_seconds)}.prom"
