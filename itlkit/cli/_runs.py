"""`itlkit simulate --runs`: every run of a runs file simulated, one JSON object per line."""

from __future__ import annotations

import json

from itlkit.physics.calibration import load_calibration


def simulate_runs(args) -> int:
    """Print one JSON object per run: the prediction, or the run's id and why it cannot run."""
    from itlkit.calibration.intake import intake_caveat
    from itlkit.calibration.predict import predict_run
    from itlkit.calibration.ttft_floor import cache_caveat
    from itlkit.errors import ConfigError
    from itlkit.sim.runs import RunError, read_runs

    runs = read_runs(args.runs, lenient=True)  # one bad run gets its error line, not the file
    calibration = load_calibration(args.calibration)
    for run in runs:
        try:
            if isinstance(run, RunError):
                raise ConfigError(run.message)
            line = predict_run(run, calibration, seed=args.seed).to_json()
            if run.engine_assumptions:  # the engine defaults its vLLM version gave it
                line["assumed"] = list(run.engine_assumptions)
            if caveat := cache_caveat(run):
                line["caveat"] = caveat
            if intake := intake_caveat(run, line["ttft_mean_seconds"]):
                line["intake"] = intake
        except ConfigError as exc:  # unknown rates, a model that does not fit, ...
            line = {"id": run.id, "error": str(exc)}
        line["calibration"] = calibration.name
        if not isinstance(run, RunError):  # which constants, and what they are worth here
            scope = calibration.for_run(run)
            beyond = scope.beyond(model=run.model.size_class, client=run.workload.client)
            line["calibration_scope"] = scope.describe() + (f"; {beyond}" if beyond else "")
            if errors := scope.own_error():  # the same, as numbers
                line["calibration_leave_one_out"] = errors
        print(json.dumps(line), flush=True)
    return 0
