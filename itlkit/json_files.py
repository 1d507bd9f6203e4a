"""Reading a JSON input file with one-line errors that name the file (and the line)."""

from __future__ import annotations

import json
from pathlib import Path

from itlkit.errors import ConfigError


def read_json_file(path, *, kind: str):
    """The parsed document of the `kind` file at `path` (e.g. kind="runs"), or ConfigError."""
    path = Path(path)
    try:
        if not path.is_file():
            raise ConfigError(f"{path}: no such {kind} file")
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
