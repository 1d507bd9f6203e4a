"""`sim.runs_writer`: the left-out list and the file bytes the real-source converters share."""

from __future__ import annotations

from collections import Counter

import pytest

from itlkit.sim.runs_writer import left_out_section, write_runs


def test_left_out_lists_the_reasons_that_occurred_in_their_order():
    reasons = {"failed": "no request completed", "duplicate": "the same file twice",
               "no_config": "no config.json"}  # fmt: skip
    got = left_out_section(Counter(no_config=2, failed=1), reasons, ["a.json"], [])
    # in the order of `reasons`, without the one that never occurred
    assert list(got["counts"].items()) == [("failed", 1), ("no_config", 2)]
    assert list(got["reasons"]) == ["failed", "no_config"]
    assert got["files"] == ["a.json"] and got["runs_refused"] == []


def test_the_file_keeps_utf8_and_refuses_nan(tmp_path):
    out = tmp_path / "runs.json"
    write_runs({"format": "itlkit-runs/1", "note": "µs"}, out)
    # one-space indent, the character as UTF-8 (not \\u00b5), a final newline
    assert out.read_bytes() == '{\n "format": "itlkit-runs/1",\n "note": "µs"\n}\n'.encode()
    with pytest.raises(ValueError):
        write_runs({"x": float("nan")}, out)


def test_a_converter_writes_its_file_and_says_what_it_left_out(tmp_path, capsys):
    from itlkit.sim.runs_writer import convert

    def build(root):
        assert root == tmp_path
        return {"runs": [{"id": "a"}], "left_out": {"counts": {"failed": 2}}}

    out = tmp_path / "out.json"
    assert convert(build, description="x", default_out=tmp_path / "no.json",
                   argv=[str(tmp_path), "-o", str(out)]) == 0  # fmt: skip
    assert '"id": "a"' in out.read_text()
    assert capsys.readouterr().err.strip() == f"{out}: 1 runs; left out {{'failed': 2}}"
