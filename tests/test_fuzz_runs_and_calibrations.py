"""Fuzzing the calibration inputs: runs files (`itlkit-runs/1`) and CALIBRATION.json files with
any field replaced by a value of another type or out of range end in a documented error (one
line, exit 2) or a correct answer, never an internal error (exit 3) or a traceback.

The documents start from the real fixture (data/real-runs) and a real calibration
(data/calibration.json); the runs file keeps one run with a 10-second stage, so each
`simulate --runs` stays short.
"""

from __future__ import annotations

import contextlib
import io
import json

from _paths import REAL_RUNS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from itlkit.bundled import bundled_path
from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.physics.calibration import calibration_from_json
from itlkit.sim.runs import parse_runs

FIXTURE = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text())
RUN = next(r for r in FIXTURE["runs"] if r["id"] == "trainval:64")
RUN["workload"]["stages"] = [{"rate_per_second": 2.0, "duration_seconds": 10.0}]
BASE_RUNS = {**FIXTURE, "runs": [RUN]}
CALIBRATION = json.loads(bundled_path("calibration.json").read_text())
ODD = st.sampled_from([None, True, -1, 0, 1e308, float("nan"), "x", "", [], [1], {}, {"a": 1},
                       "h100-sxm", 3.5, 10**20])  # fmt: skip
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def _paths(doc, prefix=()):
    """Every (path) to a value inside a JSON document."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


@st.composite
def mutated(draw, base, shallow_depth: int):
    doc = json.loads(json.dumps(base))
    paths = list(_paths(doc))
    top = [q for q in paths if len(q) == 1]
    shallow = [q for q in paths if len(q) <= shallow_depth]  # the top fields, often
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(top) | st.sampled_from(shallow) | st.sampled_from(paths))
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
            if draw(st.booleans()) or not isinstance(node, dict):
                node[path[-1]] = draw(ODD)
            else:
                del node[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the way there
    return doc


def _cli(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


@FUZZ
@given(doc=mutated(BASE_RUNS, 3))
def test_runs_files_of_any_shape_parse_or_fail_cleanly(doc):
    try:
        parse_runs(doc, source="fuzz.json", lenient=True)
    except ConfigError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(doc=mutated(BASE_RUNS, 3))
def test_simulate_runs_on_any_runs_file_exits_0_or_2(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("runs") / "runs.json"
    path.write_text(json.dumps(doc))
    code, err = _cli(["simulate", "--runs", str(path), "--json", "--calibration", "none"])
    assert code in (0, 2), err
    assert code == 0 or err.count("\n") == 1, err


@FUZZ
@given(doc=mutated(CALIBRATION, 1))
def test_calibration_files_of_any_shape_read_or_fail_cleanly(doc):
    try:
        c = calibration_from_json(doc, source="fuzz.json")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert 0.05 <= c.efficiency <= 1 and c.host_seconds_per_step >= 0
    c.describe()  # every field it prints is usable
    c.to_json()
