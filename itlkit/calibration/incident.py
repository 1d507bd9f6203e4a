"""A calibration from one incident's metrics (scrapes or a Prometheus range): the what-if
replay's engine speed (`diagnosis.whatif.calibrate`: the replay of the incident's own settings
must give its observed mean ITL, the one exact statistic a histogram keeps).

One mean fixes one speed: the efficiency (or, when even a slow GPU replays too fast, a typical
efficiency and the host time per step). The per-sequence host cost and the all-reduce latency
are left at 0, as the replay assumes; the TTFT pipeline and the jitter are taken from a base
calibration (they do not move the mean ITL). `CALIBRATION.json` says so.
"""

from __future__ import annotations

from dataclasses import replace

from itlkit.diagnosis.scoring import Diagnosis
from itlkit.diagnosis.whatif import calibrate as replay_speed
from itlkit.physics.calibration import UNCALIBRATED, Calibration
from itlkit.physics.roofline import REFERENCE


def calibration_from_incident(
    diagnosis: Diagnosis, *, source: str, base: Calibration | None = None, seed: int = 0
) -> Calibration:
    """The engine speed that replays the incident's mean ITL, as a calibration."""
    base = base or UNCALIBRATED
    speed = replay_speed(diagnosis, seed=seed)
    kept = f"kept from the base calibration {base.name!r} (does not move the mean ITL)"
    zero = "one incident's mean ITL fixes one speed: left at 0, as the what-if replay assumes"
    return replace(
        base,
        efficiency=speed.efficiency,
        host_seconds_per_step=speed.host_overhead_seconds,
        host_seconds_per_sequence=0.0,
        allreduce_seconds_per_call={"nvlink": 0.0, "pcie": 0.0, "network": 0.0},
        step_model=REFERENCE,  # the what-if replay's step model
        groups={},  # the incident's constants hold for its deployment, whatever the GPU
        group="",
        leave_one_source_out={},
        name=source,
        fitted_on=(source,),
        uncertainty={},
        undetermined={
            "host_seconds_per_sequence": zero,
            "allreduce_seconds_per_call": zero,
            "ttft_pipeline_steps": kept,
            "ttft_pipeline_seconds": kept,
            "step_jitter": kept,
        },
        residuals={source: {"itl_mean_seconds":
                            speed.replay_itl_mean_seconds / speed.observed_itl_mean_seconds - 1}},
        leave_one_out={},
    )  # fmt: skip
