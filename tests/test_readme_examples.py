"""The README's command-line examples, run verbatim (issue 19: the documented `diagnose` output
did not reproduce).

A block that starts with `$ itlkit ...` is a command (continued by trailing backslashes) and
the output it prints: every shown line must be printed, in order and unchanged, up to a `...`
line that marks where the README stops showing. The block of further examples lists commands
without output: each that needs no live server and has no `[optional]` part must exit 0.
They run from a folder that mirrors the checkout's data, so nothing is left behind in it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```[a-z]*\n(.*?)^```", README, re.MULTILINE | re.DOTALL)
NEEDS_A_SERVER = ("itlkit scrape", "--prometheus")


def _commands_with_output() -> list[tuple[str, list[str]]]:
    examples = []
    for block in BLOCKS:
        lines = block.splitlines()
        if not lines or not lines[0].startswith("$ itlkit "):
            continue
        command = lines[0][2:]
        i = 1
        while command.endswith("\\"):
            command = command[:-1] + " " + lines[i].strip()
            i += 1
        shown = lines[i:]
        examples.append((command, shown[: shown.index("...")] if "..." in shown else shown))
    return examples


def _other_commands() -> list[str]:
    commands, pending = [], ""
    for block in BLOCKS:
        for line in block.splitlines():
            line = pending + re.sub(r"\s+#.*$", "", line).strip()
            pending = line[:-1] + " " if line.endswith("\\") else ""
            if line.startswith("itlkit ") and not pending:
                commands.append(line)
    return commands


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[0] == "itlkit"
    return subprocess.run([sys.executable, "-m", "itlkit", *argv[1:]], cwd=cwd,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def checkout_mirror(tmp_path_factory) -> Path:
    """A folder whose top-level entries link to the checkout's: paths resolve as in the README,
    and files a command writes land here, not in the checkout."""
    mirror = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (mirror / entry.name).symlink_to(entry)
    return mirror


def test_the_readme_shows_examples_with_their_output():
    commands = [c for c, _ in _commands_with_output()]
    assert any(c.startswith("itlkit explain ") for c in commands)
    assert any(c.startswith("itlkit diagnose ") for c in commands)


@pytest.mark.parametrize("command,shown", _commands_with_output(), ids=lambda v: str(v)[:40])
def test_a_readme_example_prints_what_the_readme_shows(command, shown, checkout_mirror):
    result = _run(command, checkout_mirror)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    assert len(shown) > 5
    for n, (want, got) in enumerate(zip(shown, printed, strict=False), 1):
        assert got == want, f"README line {n} of `{command}`:\n  shown:   {want}\n  printed: {got}"
    assert len(printed) >= len(shown)


OTHERS = [c for c in _other_commands() if "[" not in c and not any(s in c for s in NEEDS_A_SERVER)]


def test_the_further_examples_include_runnable_ones():
    assert any(c.startswith("itlkit histogram ") for c in OTHERS)
    assert any(c.startswith("itlkit calibrate ") for c in OTHERS)


def test_the_further_readme_examples_run(checkout_mirror):
    for command in OTHERS:  # in order: `simulate --runs` reads what `calibrate` wrote
        result = _run(command, checkout_mirror)
        assert result.returncode == 0, f"`{command}` exited {result.returncode}: {result.stderr}"
        assert result.stdout.strip(), command
