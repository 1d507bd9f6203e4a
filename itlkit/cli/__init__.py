"""The `itlkit` command line: one subcommand per module in this package.

Each module that defines `add_parser(subparsers)` and `run(args) -> int` becomes a subcommand
named after the module; only the module of the command being run is imported.
Exit codes, the same for every subcommand:

- 0: done;
- 1: done, and the answer is "no" (a configuration that does not fit in GPU memory);
- 2: bad input (a name, a file, a number, a URL): one line on stderr says what and where;
- 3: itlkit itself failed (a bug, or a resource such as memory ran out): one line says so;
- 130: interrupted (Ctrl-C).

No failure prints a traceback unless `--debug` is given (before or after the subcommand).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import warnings

from itlkit.errors import ConfigError, UnknownNameError

USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, UnknownNameError, ValueError, OSError)


# argparse reads a value such as "-inf", "-nan" or "-1e5" as an unknown option and answers
# "expected one argument"; read as a value, the flag's own type says what is wrong with it.
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with the error contract: a bad argument is one line (and `--help` for more)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser: with `command`, only that subcommand's module is imported (so
    `itlkit explain` never loads pandas); without, every discovered subcommand."""
    parser = _Parser(
        prog="itlkit",
        description="Decompose LLM inter-token latency: floor, interference, metrics.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of failures")
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
    """Run the CLI; returns the process exit code (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    argv = [word for word in argv if word != "--debug"]
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if debug:
        return int(args.func(args) or 0)
    return _run_guarded(args)


def _run_guarded(args) -> int:
    """`args.func(args)` with every failure turned into one line and its exit code."""
    where = f"itlkit {args.command}"
    try:
        with warnings.catch_warnings():
            # numpy's overflow or invalid-value warning means an input beyond every bound
            # slipped through: one line instead of the warning above a wrong number
            warnings.simplefilter("error", RuntimeWarning)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("itlkit: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeWarning, FloatingPointError, OverflowError) as exc:
        print(
            f"{where}: error: a number went out of range while computing ({exc}); an input "
            "is far beyond any real server: check the sizes and times given",
            file=sys.stderr,
        )
        return 2
    except MemoryError:
        print(f"{where}: error: out of memory; ask for less (a shorter run, fewer requests)",
              file=sys.stderr)  # fmt: skip
        return 3
    except Exception as exc:  # a bug: say so in one line, --debug shows where
        print(f"{where}: internal error: {type(exc).__name__}: {exc} (rerun with --debug "
              "for the traceback, and please report it)", file=sys.stderr)  # fmt: skip
        return 3


if __name__ == "__main__":
    sys.exit(main())
