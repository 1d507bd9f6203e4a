"""The traffic flags `simulate` and `plan` share: lengths (a fixed count or a distribution of
tokens) and rate profiles."""

from __future__ import annotations

import argparse
import math

from itlkit.cli._args import number_between, shown, tokens
from itlkit.errors import ConfigError
from itlkit.sim.arrivals import RateProfile
from itlkit.sim.lengths import Fixed, LogNormal, Uniform, read_quantiles_csv

LENGTHS_HELP = (
    "N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA; also lognormal-mean:MEAN:SIGMA, "
    "lognormal-mean-sd:MEAN:SD or quantiles:FILE (a CSV of level,tokens); in tokens"
)


def lengths(text: str):
    """`4096`, `fixed:N`, `uniform:LOW:HIGH`, `lognormal:MEDIAN:SIGMA`,
    `lognormal-mean:MEAN:SIGMA`, `lognormal-mean-sd:MEAN:SD` or `quantiles:FILE` (tokens)."""
    kind, *values = text.split(":")
    try:
        if not values:
            return Fixed(tokens(kind))
        if kind == "quantiles":
            return read_quantiles_csv(text.split(":", 1)[1])
        if kind == "fixed" and len(values) == 1:
            return Fixed(tokens(values[0]))
        if kind == "uniform" and len(values) == 2:
            return Uniform(*(tokens(v) for v in values))
        lognormals = {"lognormal": LogNormal, "lognormal-mean": LogNormal.from_mean,
                      "lognormal-mean-sd": LogNormal.from_mean_sd}  # fmt: skip
        if kind in lognormals and len(values) == 2:
            return lognormals[kind](*(_number(v, text) for v in values))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc}") from None
    raise argparse.ArgumentTypeError(f"{shown(text)} is not {LENGTHS_HELP}")


def _number(text: str, whole: str) -> float:
    try:
        return float(text) if len(text) <= 40 else math.nan
    except ValueError:
        message = f"{shown(text)} in {shown(whole)} is not a number"
        raise argparse.ArgumentTypeError(message) from None


profile_start = number_between(0.0, 1e7, "a start time in seconds")
profile_rate = number_between(0.0, 1e6, "an arrival rate in requests/s")


def rate_profile(text: str) -> RateProfile:
    """`START:RATE,START:RATE,...` (seconds, requests/s), starting at 0."""
    starts, rates = [], []
    for item in text.split(","):
        pair = item.split(":")
        if len(pair) != 2:
            where = "" if item == text else f" in {shown(text)}"
            raise argparse.ArgumentTypeError(
                f"{shown(item)}{where} is not START:RATE (seconds from 0, requests/s), as in "
                "0:2,60:8,90:2"
            )
        starts.append(profile_start(pair[0]))
        rates.append(profile_rate(pair[1]))
    try:
        return RateProfile(tuple(starts), tuple(rates))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc}") from None
