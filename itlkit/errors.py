"""The error types every layer raises; the CLI turns each into one line and an exit code.

All derive from `ItlkitError` (a `ValueError`), so a caller can catch the whole family at once.
"""

from __future__ import annotations


class ItlkitError(ValueError):
    """Any input or configuration that itlkit cannot work with; the message says what and where."""


class ConfigError(ItlkitError):
    """A model, deployment or config file that cannot work; the message says what and where."""


class SettingError(ConfigError):
    """A server setting the engine would refuse: `setting` is its vLLM name (`max_num_seqs`), so
    a caller can name the field it came from; `state` says how it stands ("is needed")."""

    def __init__(self, message: str, *, setting: str, state: str) -> None:
        super().__init__(message)
        self.setting, self.state = setting, state


class UnknownNameError(KeyError, ItlkitError):
    """A catalog lookup by a name that does not exist; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class HistogramError(ItlkitError):
    """A histogram that cannot be used as given: the message says what is wrong and where."""


class SourceError(ItlkitError):
    """Input that itlkit cannot read; the message names the file, line or metric at fault."""


class ScrapeError(ItlkitError):
    """A URL that cannot be scraped: unreachable, silent, or answering with an error."""


class PrometheusError(ItlkitError):
    """A Prometheus server that cannot be reached or that rejected a query."""


class EvidenceError(ItlkitError):
    """Metrics that cannot support a diagnosis (no ITL histogram, nothing observed, ...)."""
