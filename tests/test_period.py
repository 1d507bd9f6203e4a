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
