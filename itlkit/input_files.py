"""Opening the files a user hands itlkit, with one line that names the file and what is wrong.

Every reader of a user's file (pages, bench results, runs, calibrations, workloads, model
configs) comes through here, so a folder, a pipe, a loop of links, a missing file, a file in
the wrong encoding or one too big to be what it claims get the same words everywhere, never a
library's (`[Errno 40]`, `'utf-8' codec can't decode byte 0xe9 in position 53`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from itlkit.errors import ConfigError, ItlkitError

DEFAULT_MAX_BYTES = 256_000_000  # a saved page or a detailed bench file of a long run

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_problem(path: Path, *, kind: str) -> str | None:
    """Why `path` cannot be read as a `kind` file (None: a regular file one may read)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that loops back on itself"
        if exc.errno == errno.ENOENT:
            if os.path.islink(path):
                return f"a symbolic link to {os.readlink(path)}, which does not exist"
            return f"no such {kind} file"
        if exc.errno == errno.ENOTDIR:
            return f"no such {kind} file (a part of the path is a file, not a folder)"
        if exc.errno == errno.EACCES:
            return "permission denied"
        return f"cannot be opened ({exc.strerror or exc})"
    for test, name in _KINDS:
        if test(mode):
            return f"is {name}, not a {kind} file"
    return None


def read_input_bytes(
    path, *, kind: str, max_bytes: int = DEFAULT_MAX_BYTES, error: type[ItlkitError] = ConfigError
) -> bytes:
    """The bytes of the `kind` file at `path`; anything else raises `error` naming it."""
    path = Path(path)
    problem = file_problem(path, kind=kind)
    if problem:
        raise error(f"{path}: {problem}")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise error(
                f"{path}: {size / 1e6:,.0f} MB, too big for a {kind} file "
                f"(at most {max_bytes / 1e6:,.0f} MB)"
            )
        return path.read_bytes()
    except PermissionError:
        raise error(f"{path}: permission denied") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None


def decode_text(data: bytes, *, source: str, kind: str, error=ConfigError) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or `error` saying what the bytes are."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{source}: UTF-16 text; save the {kind} file as UTF-8")
    nul = data.find(b"\x00", 0, 1 << 20)
    if nul >= 0:
        line = data[:nul].count(b"\n") + 1
        raise error(f"{source}:{line}: binary data (a NUL byte), not a {kind} file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{source}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}; a Latin-1 or Windows-1252 file?); save the {kind} file as UTF-8"
        ) from None


def read_input_text(
    path, *, kind: str, max_bytes: int = DEFAULT_MAX_BYTES, error: type[ItlkitError] = ConfigError
) -> str:
    """The UTF-8 text of the `kind` file at `path` (see `read_input_bytes`, `decode_text`)."""
    data = read_input_bytes(path, kind=kind, max_bytes=max_bytes, error=error)
    if not data.strip():
        raise error(f"{path}: empty file ({len(data)} bytes), not a {kind} file")
    return decode_text(data, source=str(path), kind=kind, error=error)


def parse_json_text(text: str, *, source: str, kind: str, error=ConfigError):
    """The JSON document in `text`, or `error` with its line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{source}:{exc.lineno}: not valid JSON (column {exc.colno}: {exc.msg}); "
            f"a {kind} file is one JSON document"
        ) from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply to be a {kind} file") from None


def read_json_file(path, *, kind: str, error: type[ItlkitError] = ConfigError):
    """The parsed document of the `kind` file at `path` (e.g. kind="runs"), or `error`."""
    text = read_input_text(path, kind=kind, error=error)
    return parse_json_text(text, source=str(path), kind=kind, error=error)
