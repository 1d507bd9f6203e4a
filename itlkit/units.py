"""Units, precisions and display formatting.

Everything inside itlkit is in SI base units: bytes, seconds, FLOPs, FLOP/s, bytes/s. Decimal
prefixes everywhere (1 GB = 1e9 B, 1 TB/s = 1e12 B/s), as datasheets use them. Conversion to
friendly units (GB, ms, TFLOP/s) happens only for display, here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from itlkit.errors import UnknownNameError

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
MILLISECOND = 1e-3
MICROSECOND = 1e-6
TERA = 1e12


@dataclass(frozen=True)
class Precision:
    """A number format: its name and how many bytes one element takes (a float: int4 is 0.5)."""

    name: str
    bytes_per_element: float


PRECISIONS: dict[str, Precision] = {
    "bf16": Precision("bf16", 2.0),
    "fp16": Precision("fp16", 2.0),
    "fp8": Precision("fp8", 1.0),
    "int8": Precision("int8", 1.0),
    "int4": Precision("int4", 0.5),
    "fp4": Precision("fp4", 0.5),
}
WEIGHT_PRECISIONS = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
KV_PRECISIONS = ("bf16", "fp16", "fp8")


def lookup(kind: str, name: str, valid: dict):
    """Look a name up in a catalog dict, or raise an error that lists every valid name."""
    key = str(name).strip().lower()
    if key in valid:
        return valid[key]
    raise UnknownNameError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(valid)}")


def weight_precision(name: str | Precision) -> Precision:
    """The weight precision called `name` (bf16, fp16, fp8, int8, int4, fp4)."""
    if isinstance(name, Precision):
        return name
    return lookup("weight precision", name, {k: PRECISIONS[k] for k in WEIGHT_PRECISIONS})


def kv_precision(name: str | Precision) -> Precision:
    """The KV-cache precision called `name` (bf16, fp16, fp8)."""
    if isinstance(name, Precision):
        return name
    return lookup("KV precision", name, {k: PRECISIONS[k] for k in KV_PRECISIONS})


def _scalar(value) -> float:
    array = np.asarray(value, dtype=float)
    if array.size != 1:
        raise ValueError("formatting takes one value, not an array")
    return float(array.reshape(()))


def format_seconds(seconds) -> str:
    """Seconds as ms (or s / µs when that reads better)."""
    value = _scalar(seconds)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞"
    if abs(value) >= 10:
        return f"{value:.1f} s"
    if abs(value) >= 1:
        return f"{value:.2f} s"
    if abs(value) >= 1e-3 or value == 0:
        return f"{value / MILLISECOND:.2f} ms"
    return f"{value / MICROSECOND:.1f} µs"


def format_bytes(num_bytes) -> str:
    """Bytes in decimal units (GB = 1e9 B)."""
    value = _scalar(num_bytes)
    for unit, size in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:,.0f} B"


def format_flops(flops) -> str:
    """A FLOP count in TFLOP or GFLOP."""
    value = _scalar(flops)
    if abs(value) >= TERA:
        return f"{value / TERA:.1f} TFLOP"
    return f"{value / 1e9:.2f} GFLOP"


def format_rate(flops_per_second) -> str:
    """A FLOP rate in TFLOP/s."""
    return f"{_scalar(flops_per_second) / TERA:.1f} TFLOP/s"


def format_bandwidth(bytes_per_second) -> str:
    """A byte rate in TB/s or GB/s."""
    value = _scalar(bytes_per_second)
    if abs(value) >= TB:
        return f"{value / TB:.2f} TB/s"
    return f"{value / GB:.0f} GB/s"


def format_release(release: tuple[int, ...]) -> str:
    """A release as its dotted name: (0, 10, 1, 1) -> "0.10.1.1"."""
    return ".".join(map(str, release))


def format_percent(fraction) -> str:
    """A fraction as a percentage."""
    return f"{100 * _scalar(fraction):.0f}%"
