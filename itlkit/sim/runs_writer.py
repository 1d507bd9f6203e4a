"""Writing the runs format (`itlkit-runs/1`): what the converters of real sources share.

Each `data/real-runs-*/make_runs.py` turns one public source into runs and lists what it left
out, and why; these write that list and the file the same way, so that the same source files
give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def left_out_section(counts: Counter, reasons: dict[str, str], files: list, refused: list) -> dict:
    """The file's `left_out`: how many were left out for each reason that occurred (in the
    order of `reasons`), what each reason means, the files left out and the runs the reader
    refused."""
    seen = [key for key in reasons if counts[key]]
    return {
        "counts": {key: counts[key] for key in seen},
        "reasons": {key: reasons[key] for key in seen},
        "files": files,
        "runs_refused": refused,
    }


def write_runs(doc: dict, path: Path) -> None:
    """`doc` as JSON (one-space indent, UTF-8 as is, no NaN), newline-terminated."""
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def convert(build, *, description: str, default_out: Path, argv=None) -> int:
    """A converter's command line: `make_runs.py ROOT [-o OUT]` builds the runs file from the
    folder of `<commit>/<path>` source files with `build(root)`, writes it, and says on stderr
    how many runs it holds and how many were left out for each reason."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("root", type=Path, help="the folder of <commit>/<path> source files")
    parser.add_argument("-o", "--out", type=Path, default=default_out)
    args = parser.parse_args(argv)
    doc = build(args.root)
    write_runs(doc, args.out)
    print(f"{args.out}: {len(doc['runs'])} runs; left out {doc['left_out']['counts']}",
          file=sys.stderr)  # fmt: skip
    return 0
