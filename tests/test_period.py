"""The period a Prometheus diagnosis asks for (`--start`, `--end`): read, and refused when empty."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itlkit.diagnosis.evidence import period_seconds
from itlkit.errors import EvidenceError

START = "2026-12-02T15:00:00Z"
START_SECONDS = datetime(2026, 12, 2, 15, tzinfo=UTC).timestamp()


def test_rfc3339_and_unix_seconds_give_the_same_period():
    assert period_seconds(START, "2026-12-02T16:00:00Z", 60) == (
        START_SECONDS,
        START_SECONDS + 3600,
    )
    assert period_seconds(str(START_SECONDS), str(START_SECONDS + 60), 60) == (
        START_SECONDS,
        START_SECONDS + 60,
    )


@pytest.mark.parametrize("end", ["2026-12-02T14:00:00Z", START])
def test_an_end_not_after_the_start_says_so(end):
    with pytest.raises(
        EvidenceError, match=rf"the end \({end}\) is not after the start \({START}\)"
    ):
        period_seconds(START, end, 60)


def test_a_period_shorter_than_one_window_is_refused():
    with pytest.raises(EvidenceError, match=r"the period \(59 s\) must span at least one window"):
        period_seconds(START, "2026-12-02T15:00:59Z", 60)


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ("1796223600000", r"the start '1796223600000' is not a time from 2000 to 2099 "
                          r"\(milliseconds\? 1796223600 s is 2026-12-02T15:00:00Z\)"),
        ("inf", "the start 'inf' is not a time from 2000 to 2099: use unix seconds"),
        ("-1e12", "the start '-1e12' is not a time from 2000 to 2099: use unix seconds"),
        ("1999-12-31T23:59:59Z", "the start '1999-12-31T23:59:59Z' is not a time from 2000"),
        ("", "the start '' is not a time: use unix seconds or e.g. 2026-12-02T15:00:00Z"),
    ],
)  # fmt: skip
def test_a_start_outside_2000_to_2099_is_refused_with_a_hint(start, message):
    with pytest.raises(EvidenceError, match=message):
        period_seconds(start, "2026-12-02T16:00:00Z", 60)


def test_names_say_which_flag_and_a_period_over_prometheus_points_is_refused():
    with pytest.raises(EvidenceError, match="^--end 'nan' is not a time"):
        period_seconds(START, "nan", 60, names=("--start", "--end", "--window"))
    week, eight_days = "2026-12-09T15:00:00Z", "2026-12-10T15:00:00Z"
    assert period_seconds(START, week, 60, max_windows=11_000)[1] == START_SECONDS + 7 * 86400
    with pytest.raises(
        EvidenceError,
        match=r"^the start to the end span 8\.0 days: 11,520 windows of 60 s, more than the "
        r"11,000 points .* at most 7\.6 days or make the window at least 63 s$",
    ):
        period_seconds(START, eight_days, 60, max_windows=11_000)
