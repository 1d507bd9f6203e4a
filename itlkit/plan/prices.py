"""GPU-hour prices, each with where it comes from and when (an editable JSON file).

The bundled table (`data/gpu_prices.json`) holds on-demand list prices per GPU-hour; a team
passes its own (`--prices FILE`, the same format) for its contract or reserved rates. A GPU the
table does not price is an error naming it, never a silent zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from itlkit.bundled import bundled_path
from itlkit.errors import ConfigError
from itlkit.input_files import read_json_file


@dataclass(frozen=True)
class PriceTable:
    """Dollars per GPU-hour by GPU slug, the table's date and where it was read from."""

    per_gpu_hour: dict[str, float]
    sources: dict[str, str]
    date: str
    origin: str

    def price(self, gpu: str) -> float:
        if gpu not in self.per_gpu_hour:
            raise ConfigError(
                f"{self.origin}: no price for GPU {gpu!r} (priced: "
                f"{', '.join(sorted(self.per_gpu_hour)) or 'none'}); add it, or pass --prices FILE"
            )
        return self.per_gpu_hour[gpu]


def read_prices(path=None) -> PriceTable:
    """A price table: the bundled one (None) or a file of the same format."""
    origin = str(path) if path is not None else "itlkit's bundled GPU prices"
    doc = read_json_file(bundled_path("gpu_prices.json") if path is None else path,
                         kind="GPU price table")  # fmt: skip
    entries = doc.get("prices") if isinstance(doc, dict) else None
    if not isinstance(entries, dict) or not entries:
        raise ConfigError(f"{origin}: a price table needs a 'prices' object of GPU -> entry")
    prices, sources = {}, {}
    for gpu, entry in entries.items():
        value = entry.get("per_gpu_hour") if isinstance(entry, dict) else None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (value > 0 and math.isfinite(value))
        ):
            raise ConfigError(f"{origin}: prices.{gpu}.per_gpu_hour must be a price > 0, got "
                              f"{value!r}")  # fmt: skip
        prices[gpu], sources[gpu] = float(value), str(entry.get("source", "no source given"))
    return PriceTable(prices, sources, str(doc.get("date", "undated")), origin)
