"""The time in a scrape file's name: a name that holds no valid time is named, with why."""

from __future__ import annotations

import pytest

from itlkit.cli import main
from itlkit.errors import SourceError
from itlkit.metrics.scrape_names import timestamp_from_name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("metrics-00001202T150000Z.prom", "year 0000 is not from 0001 to 9999"),
        ("metrics-20261302T150000Z.prom", "month 13 is not from 01 to 12"),
        ("metrics-20260230T150000Z.prom", "day 30 is not in 2026-02, which has 28 days"),
        ("metrics-20261202T250000Z.prom", "25:00:00 is not a time of day"),
        ("metrics-20261202T156100Z.prom", "15:61:00 is not a time of day"),
        (
            "metrics-20261202T150000+9999.prom",
            "zone +9999 is not a UTC offset from -23:59 to +23:59",
        ),
        (
            "metrics-20261202T150000+24:60.prom",
            "zone +24:60 is not a UTC offset from -23:59 to +23:59",
        ),
        (
            "metrics-20261202T150000-2400.prom",
            "zone -2400 is not a UTC offset from -23:59 to +23:59",
        ),
    ],
)
def test_a_name_that_holds_no_valid_time_says_which_part(name, why):
    stamp = name.removeprefix("metrics-").removesuffix(".prom")
    with pytest.raises(SourceError) as info:
        timestamp_from_name(name)
    assert str(info.value) == (
        f"{name}: the file name's timestamp {stamp} is not a valid time ({why})"
    )


def test_the_widest_valid_zones_and_a_leap_day_read():
    # 2024-12-31T00:00+23:59 is 2024-12-30T00:01Z; 2024-02-29T00:00-23:59 is 02-29T23:59Z
    assert timestamp_from_name("metrics-20241231T000000+2359.prom") == 1735516860.0
    assert timestamp_from_name("metrics-20240229T000000-23:59.prom") == 1709251140.0
    assert timestamp_from_name("metrics-20240229T120000Z.prom") == 1709208000.0


def test_the_cli_names_the_file_in_one_line(tmp_path, capsys):
    (tmp_path / "metrics-20261202T150000+9999.prom").write_text("# nothing\n")
    assert main(["histogram", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metrics-20261202T150000+9999.prom: the file name's" in err
    assert "timedelta" not in err
