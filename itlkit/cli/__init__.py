"""The `itlkit` command line: one subcommand per module in this package.

Each module that defines `add_parser(subparsers)` and `run(args) -> int` becomes a subcommand
named after the module; only the module of the command being run is imported.
Errors that itlkit raises on purpose (bad names, bad input files, configurations that cannot
run) print one clear line on stderr and exit 2; they never show a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from itlkit.errors import ConfigError, UnknownNameError

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, UnknownNameError, ValueError, OSError)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser: with `command`, only that subcommand's module is imported (so
    `itlkit explain` never loads pandas); without, every discovered subcommand."""
    parser = argparse.ArgumentParser(
        prog="itlkit",
        description="Decompose LLM inter-token latency: floor, interference, metrics.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = sorted(i.name for i in pkgutil.iter_modules(__path__) if not i.name.startswith("_"))
    for name in [command] if command in names else names:
        module = importlib.import_module(f"{__name__}.{name}")
        if hasattr(module, "add_parser"):
            module.add_parser(subparsers)
    return parser


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("itlkit: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        print(f"itlkit {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
