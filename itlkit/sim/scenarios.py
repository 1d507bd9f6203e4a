"""The golden scenarios: one simulated incident per cause, plus a healthy and a mixed one.

Each scenario runs the scheduler simulator (itlkit.sim.scheduler) on a Llama 3.1 8B / H100 SXM
deployment and exports what vLLM would have exposed: a folder of `/metrics` scrapes. The
diagnosis must find each scenario's true cause from those files alone. Every incident comes at
three noise levels (`NOISE_LEVELS`):

* `clean` (the top-level folders): the plain roofline at 60% of its speed (real servers reach
  50-70% of HBM bandwidth), no host time, no jitter; scrapes every 30 s.
* `calibrated`: the step model of the bundled calibration (data/calibration.json, fitted on 13
  real vLLM 0.15.1 runs: efficiency, host time per step and per sequence, all-reduce latency)
  and its step jitter (a mean-one lognormal factor per step, log sd 0.175), which makes the
  real per-token ITL tail; scrapes every 60 s (Prometheus' default interval).
* `noisy`: the same at twice the fitted jitter (log sd 0.35): a noisier host or a shared node.

Regenerate with `python -m itlkit.sim.scenarios data/scenarios`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from itlkit.physics.calibration import Calibration, load_calibration
from itlkit.physics.roofline import Deployment
from itlkit.sim.export import export_prometheus_scrapes
from itlkit.sim.export_sglang import export_sglang_scrapes
from itlkit.sim.scheduler import (
    SchedulerConfig,
    SimulationResult,
    simulate_deployment,
    step_jitter_factors,
)
from itlkit.sim.workload import RateProfile, synthetic_workload

GENERATED_BY = "python -m itlkit.sim.scenarios data/scenarios"


@dataclass(frozen=True)
class NoiseLevel:
    """How real the simulated server is: its step model, its jitter and the scrape interval."""

    name: str
    folder: str  # under data/scenarios; "" = the top-level folders
    calibrated: bool  # the bundled calibration's step model (else the roofline at 60%)
    step_jitter: float | None  # log sd of the per-step factor; None = the calibration's own
    interval_seconds: float
    why: str


NOISE_LEVELS: dict[str, NoiseLevel] = {
    level.name: level
    for level in [
        NoiseLevel(
            "clean", "", calibrated=False, step_jitter=0.0, interval_seconds=30.0,
            why="the plain roofline at 60% of its speed, no host time, no jitter: every step "
            "exactly its formula (the original golden incidents)",
        ),
        NoiseLevel(
            "calibrated", "calibrated", calibrated=True, step_jitter=None, interval_seconds=60.0,
            why="the step model and the step jitter fitted on 13 real vLLM 0.15.1 runs "
            "(data/calibration.json)",
        ),
        NoiseLevel(
            "noisy", "noisy", calibrated=True, step_jitter=0.35, interval_seconds=60.0,
            why="the calibrated step model at twice the fitted jitter: a noisier host, a shared "
            "node or a busier Python event loop",
        ),
    ]
}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A simulated incident and the causes it was built to show.

    `host_overhead_seconds` is the injected host work per step beyond a healthy server's: at
    the clean level the whole host time, at a calibrated level on top of the calibration's.
    """

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
    injection: str = ""  # why the injected cause is physically plausible
    noise: str = "clean"  # a NOISE_LEVELS name
    step_jitter: float = 0.0
    calibration: dict | None = None  # the calibration's step constants (None: plain roofline)
    extra: dict = field(default_factory=dict)
    engine: str = "vllm"  # "sglang": SGLang's schedule (prefill batches alone) and its pages

    def deployment(self) -> Deployment:
        c = self.calibration or {}
        return Deployment.create(
            model=self.model,
            gpu=self.gpu,
            host_seconds_per_sequence=c.get("host_seconds_per_sequence", 0.0),
            allreduce_latency_seconds=c.get("allreduce_seconds_per_call", 0.0),
        )

    def config(self) -> SchedulerConfig:
        """vLLM's mixed steps, or SGLang's prefill batches alone at its chunk size
        (`max_num_batched_tokens` standing for --chunked-prefill-size; `sim.sglang`)."""
        return SchedulerConfig(
            max_num_batched_tokens=self.max_num_batched_tokens, max_num_seqs=self.max_num_seqs,
            prefill_only_steps=self.engine == "sglang",
        )  # fmt: skip

    def kv_tokens(self) -> int | None:
        """The engine's KV pool: SGLang's sizing (`sglang_kv_cache`), else vLLM's (None)."""
        if self.engine != "sglang":
            return None
        from itlkit.physics.engine_memory import cuda_total_bytes, sglang_kv_cache
        from itlkit.sim.sglang import sglang_settings

        dep = self.deployment()
        total = cuda_total_bytes(dep.gpu)[0]
        share = sglang_settings(gpu_memory_bytes=total, gpus=dep.tp).mem_fraction_static
        return sglang_kv_cache(replace(dep, gpu_memory_utilization=share)).kv_tokens

    @property
    def total_host_seconds_per_step(self) -> float:
        """The healthy host time of the step model plus the injected one."""
        healthy = (self.calibration or {}).get("host_seconds_per_step", 0.0)
        return healthy + self.host_overhead_seconds


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
            injection="nothing injected: ~4 x 3 s = 12 sequences decoding, 128-token prompts "
            "that cost a step a few per cent",
        ),
        Scenario(
            name="prefill_interference",
            description="4,096-token prompts arriving at 2.5/s beside ~10-20 decoding streams, "
            "2,048-token budget: every chunk stalls the batch",
            causes=("prefill_interference",),
            rate_per_second=2.5,
            prompt_tokens=4096,
            output_tokens=256,
            seed=2,
            injection="long prompts (RAG, documents) under vLLM's default chunked prefill: each "
            "arrival is two 2,048-token chunks, each ~30-60 ms of matmul riding in a ~7 ms "
            "decode step",
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
            injection="a traffic ramp (a launch, a batch job): the prefix cache keeps chunks "
            "small, so the step grows with the KV the batch reads, smoothly, with the load",
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
            injection="25 ms of CPU work per step that the GPU waits for: eager mode without "
            "CUDA graphs plus a slow sampler (a Python logits processor)",
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
            injection="long generations (reasoning traces): at 0.8/s, requests that each "
            "decode for minutes pile up until their KV (up to 8,448 tokens x 128 kB each) "
            "outgrows the ~430k tokens an H100 holds beside the weights; vLLM evicts the "
            "newest and recomputes them",
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
            injection="the growth ramp where half the requests come from a client that does "
            "not share the system prompt: those are prefilled in full, in 2,048-token chunks",
        ),
        Scenario(
            name="sglang_prefill_stall",
            description="SGLang with its defaults on one H100: 6,000-token prompts at 1.3/s; "
            "each prefill batch runs alone and every decoding stream waits it out",
            causes=("prefill_interference",),
            rate_per_second=1.3,
            prompt_tokens=6000,
            output_tokens=512,
            max_num_batched_tokens=8192,
            max_num_seqs=4096,
            seed=7,
            engine="sglang",
            injection="SGLang runs a prefill batch, when it can form one, before the running "
            "batch decodes (--enable-mixed-chunk off, its default; chunk 8,192 on an 80 GB GPU): "
            "each 6,000-token prompt (~0.3 s of prefill alone at 60% of the roofline) holds the "
            "~20 decoding streams, and prompts arriving together hold them for batch after "
            "batch; the GPU keeps up (TTFT p99 ~1.3 s)",
        ),
    ]
}

# What changes in an incident when the server runs the calibrated step model. The calibrated
# healthy host is 0.58 ms + 3.6 us per sequence; 25 ms on top of it is a broken server, not a
# slow one. The diagnosis names host overhead only for a step longer than the slowest plausible
# GPU (the floor at 35% of HBM bandwidth: 4.8 ms / 0.35 = 13.8 ms here) plus twice a healthy
# host: a smaller injection (4 ms gives a 10.7 ms step) looks, from the histogram alone, like a
# GPU at 45% of its bandwidth, and is not named. 10 ms (~17x the healthy host) is a CPU-bound
# server: eager mode (no CUDA graphs: ~32 layers x ~15 kernels launched from Python each step,
# a few ms) plus a per-token Python logits processor (structured output), or a throttled
# container.
CALIBRATED_INJECTIONS: dict[str, dict] = {
    "host_overhead": dict(
        host_overhead_seconds=0.010,
        description="small batch of short requests; 10 ms of host work per step on top of "
        "the calibrated 0.58 ms (eager mode and a Python logits processor)",
        injection="10 ms of CPU work per step beyond the calibrated healthy host (0.58 ms + "
        "3.6 us per sequence), ~17x it: eager mode launches each layer's kernels from Python "
        "(~32 layers x ~15 kernels, a few ms) and a per-token Python logits processor adds "
        "more; below ~8 ms the step (GPU ~6.1 ms at the calibrated efficiency) stays under "
        "what a GPU at 35% of its bandwidth would take (13.8 ms), which no histogram tells "
        "from host work",
    ),
}


def bundled_calibration() -> Calibration:
    """The calibration the calibrated levels use (data/calibration.json)."""
    return load_calibration()


def at_level(scenario: Scenario, level: str | NoiseLevel) -> Scenario:
    """The scenario at a noise level: its step model, jitter, interval and injections."""
    level = NOISE_LEVELS[level] if isinstance(level, str) else level
    if not level.calibrated:
        return replace(scenario, noise=level.name, step_jitter=level.step_jitter or 0.0)
    # The constants fitted for the scenario's GPU family (the golden incidents keep the
    # reference step model, on which their injections and thresholds were set).
    dep = scenario.deployment()
    cal = bundled_calibration().for_model(dep.gpu.slug, dep.model)
    constants = {
        "file": "data/calibration.json",
        "name": cal.name,
        "group": cal.group,
        "efficiency": cal.efficiency,
        "host_seconds_per_step": cal.host_seconds_per_step,
        "host_seconds_per_sequence": cal.host_seconds_per_sequence,
        "allreduce_seconds_per_call": cal.allreduce_seconds_per_call["nvlink"],
        "step_jitter": cal.step_jitter,
    }
    jitter = cal.step_jitter if level.step_jitter is None else level.step_jitter
    return replace(
        scenario,
        **CALIBRATED_INJECTIONS.get(scenario.name, {}),
        efficiency=cal.efficiency,
        interval_seconds=level.interval_seconds,
        noise=level.name,
        step_jitter=jitter,
        calibration=constants,
    )


def scenario_subfolder(name: str, level: str = "clean") -> str:
    """Where a scenario's level lives under data/scenarios: `mixed`, `noisy/mixed`."""
    folder = NOISE_LEVELS[level].folder
    return f"{folder}/{name}" if folder else name


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
        host_overhead_seconds=scenario.total_host_seconds_per_step,
        until_seconds=scenario.duration_seconds,
        jitter=step_jitter_factors(scenario.step_jitter, seed=scenario.seed),
        kv_tokens=scenario.kv_tokens(),
    )


def write_scenario(scenario: Scenario, out_dir: str | Path) -> Path:
    """Simulate and write the scrapes plus `scenario.json` (the settings and true causes)."""
    folder = Path(out_dir) / scenario_subfolder(scenario.name, scenario.noise)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("metrics-*.prom"):
        old.unlink()
    result = run_scenario(scenario)
    # The incident is the 15 minutes on the scrape grid: the server of the story keeps running,
    # so the part of the last step past the end is after the incident, not a quiet tail.
    export = export_sglang_scrapes if scenario.engine == "sglang" else export_prometheus_scrapes
    export(
        result,
        folder,
        interval_seconds=scenario.interval_seconds,
        model_name=scenario.model,
        cover_end=False,
    )
    meta = asdict(scenario)
    meta["noise_why"] = NOISE_LEVELS[scenario.noise].why
    meta["synthetic"] = True
    meta["generated_by"] = GENERATED_BY
    (folder / "scenario.json").write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def main(argv: list[str] | None = None) -> int:
    """Write every scenario at every noise level under the folder given (default
    data/scenarios)."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path("data/scenarios")
    for level in NOISE_LEVELS:
        for scenario in SCENARIOS.values():
            print(write_scenario(at_level(scenario, level), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
