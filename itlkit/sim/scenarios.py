"""The golden scenarios: one simulated incident per cause, plus a healthy and a mixed one.

Each scenario runs the scheduler simulator (itlkit.sim.scheduler) on a Llama 3.1 8B / H100 SXM
deployment at 60% of the roofline's speed (real servers reach 50-70% of HBM bandwidth) and exports
what vLLM would have exposed: a folder of `/metrics` scrapes every 30 s (a common
scrape interval; 15 s works the same and doubles the files). The diagnosis must find
each scenario's true cause from those files alone. Regenerate with
`python -m itlkit.sim.scenarios itlkit/data/scenarios`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from itlkit.physics.roofline import Deployment
from itlkit.sim.export import export_prometheus_scrapes
from itlkit.sim.scheduler import SchedulerConfig, SimulationResult, simulate_deployment
from itlkit.sim.workload import RateProfile, synthetic_workload


@dataclass(frozen=True)
class Scenario:
    """A simulated incident and the causes it was built to show."""

    name: str
    description: str
    causes: tuple[str, ...]
    rate_per_second: float | None = None
    profile_start_seconds: tuple[float, ...] = ()
    profile_rates_per_second: tuple[float, ...] = ()
    prompt_tokens: int = 4096
    output_tokens: int = 256
    shared_prefix_tokens: int = 0
    shared_prefix_fraction: float = 1.0
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 1024
    host_overhead_seconds: float = 0.0
    efficiency: float = 0.6
    duration_seconds: float = 900.0
    interval_seconds: float = 30.0
    seed: int = 0
    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    extra: dict = field(default_factory=dict)

    def deployment(self) -> Deployment:
        return Deployment.create(model=self.model, gpu=self.gpu)

    def config(self) -> SchedulerConfig:
        return SchedulerConfig(
            max_num_batched_tokens=self.max_num_batched_tokens, max_num_seqs=self.max_num_seqs
        )


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            name="healthy",
            description="short prompts at a steady 4 requests/s; small batch, no chunk to notice",
            causes=(),
            rate_per_second=4.0,
            prompt_tokens=128,
            output_tokens=200,
            seed=1,
        ),
        Scenario(
            name="prefill_interference",
            description="4,096-token prompts arriving at 2.5/s beside ~20 decoding streams, "
            "2,048-token budget: every chunk stalls the batch",
            causes=("prefill_interference",),
            rate_per_second=2.5,
            prompt_tokens=4096,
            output_tokens=256,
            seed=2,
        ),
        Scenario(
            name="batch_or_context_growth",
            description="3,072-token prompts whose 3,000-token system prompt is prefix-cached, "
            "arrivals ramping 1 -> 3 -> 6 per second: the batch grows from a few to ~80",
            causes=("batch_or_context_growth",),
            profile_start_seconds=(0.0, 300.0, 600.0),
            profile_rates_per_second=(1.0, 3.0, 6.0),
            prompt_tokens=3072,
            output_tokens=512,
            shared_prefix_tokens=3000,
            seed=3,
        ),
        Scenario(
            name="host_overhead",
            description="small batch of short requests; 25 ms of host work per step "
            "(eager mode, slow sampling)",
            causes=("host_overhead",),
            rate_per_second=1.0,
            prompt_tokens=128,
            output_tokens=256,
            host_overhead_seconds=0.025,
            seed=4,
        ),
        Scenario(
            name="preemption",
            description="short prompts with 8,192-token outputs at 0.8/s: the KV cache fills and "
            "the newest requests are preempted and recomputed",
            causes=("preemption",),
            rate_per_second=0.8,
            prompt_tokens=256,
            output_tokens=8192,
            seed=5,
        ),
        Scenario(
            name="mixed",
            description="a ramp of 0.5 -> 1.5 -> 3 requests/s of 3,072-token prompts where "
            "half of the prompts miss the prefix cache and are prefilled in full: the "
            "batch grows and chunks stall the steps",
            causes=("prefill_interference", "batch_or_context_growth"),
            profile_start_seconds=(0.0, 300.0, 600.0),
            profile_rates_per_second=(0.5, 1.5, 3.0),
            prompt_tokens=3072,
            output_tokens=512,
            shared_prefix_tokens=3000,
            shared_prefix_fraction=0.5,
            seed=6,
        ),
    ]
}


def run_scenario(scenario: Scenario) -> SimulationResult:
    """Simulate the scenario's traffic on its deployment."""
    profile = None
    if scenario.profile_rates_per_second:
        profile = RateProfile(scenario.profile_start_seconds, scenario.profile_rates_per_second)
    workload = synthetic_workload(
        duration_seconds=scenario.duration_seconds,
        rate_per_second=None if profile else scenario.rate_per_second,
        profile=profile,
        prompt_tokens=scenario.prompt_tokens,
        output_tokens=scenario.output_tokens,
        shared_prefix_tokens=scenario.shared_prefix_tokens,
        shared_prefix_fraction=scenario.shared_prefix_fraction,
        seed=scenario.seed,
    )
    return simulate_deployment(
        workload,
        deployment=scenario.deployment(),
        config=scenario.config(),
        efficiency=scenario.efficiency,
        host_overhead_seconds=scenario.host_overhead_seconds,
        until_seconds=scenario.duration_seconds,
    )


def write_scenario(scenario: Scenario, out_dir: str | Path) -> Path:
    """Simulate and write the scrapes plus `scenario.json` (the settings and true causes)."""
    folder = Path(out_dir) / scenario.name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("metrics-*.prom"):
        old.unlink()
    result = run_scenario(scenario)
    export_prometheus_scrapes(
        result, folder, interval_seconds=scenario.interval_seconds, model_name=scenario.model
    )
    meta = asdict(scenario)
    meta["synthetic"] = True
    meta["generated_by"] = "python -m itlkit.sim.scenarios itlkit/data/scenarios"
    (folder / "scenario.json").write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def main(argv: list[str] | None = None) -> int:
    """Write every scenario under the folder given (default itlkit/data/scenarios)."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path("itlkit/data/scenarios")
    for scenario in SCENARIOS.values():
        print(write_scenario(scenario, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
