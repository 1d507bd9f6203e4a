"""`itlkit simulate`: run the scheduler simulator; report ITL, TTFT and e2e (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_from_args,
    positive_float,
    positive_int,
)
from itlkit.errors import ConfigError
from itlkit.sim.workload import Fixed, LogNormal, RateProfile, Uniform
from itlkit.units import format_seconds


def _lengths(text: str):
    """`4096`, `uniform:LOW:HIGH` or `lognormal:MEDIAN:SIGMA` (tokens)."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            return Fixed(positive_int(parts[0]))
        if parts[0] == "uniform" and len(parts) == 3:
            return Uniform(positive_int(parts[1]), positive_int(parts[2]))
        if parts[0] == "lognormal" and len(parts) == 3:
            return LogNormal(float(parts[1]), float(parts[2]))
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"bad length {text!r}: {exc}") from None
    raise argparse.ArgumentTypeError(
        f"bad length {text!r}: use N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA"
    )


def _profile(text: str) -> RateProfile:
    """`START:RATE,START:RATE,...` (seconds, requests/s), starting at 0."""
    try:
        pairs = [item.split(":") for item in text.split(",")]
        starts = tuple(float(a) for a, _ in pairs)
        rates = tuple(float(b) for _, b in pairs)
        return RateProfile(starts, rates)
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(
            f"bad rate profile {text!r}: use START:RATE,... from 0 s ({exc})"
        ) from None


def add_parser(subparsers) -> None:
    """Register `itlkit simulate`."""
    p = subparsers.add_parser(
        "simulate",
        help="simulate a vLLM-style scheduler and report the ITL/TTFT distributions",
        description=(
            "Simulate continuous batching with chunked prefill (vLLM V1 semantics) on the "
            "roofline step-time model; report ITL, TTFT and e2e, optionally as vLLM metrics."
        ),
    )
    dep = p.add_argument_group("deployment")
    add_deployment_arguments(dep, memory=True)
    dep.add_argument(
        "--efficiency",
        type=positive_float,
        default=1.0,
        help="fraction of the roofline step speed the server reaches (0, 1]",
    )
    dep.add_argument("--host-overhead", type=float, default=0.0, metavar="SECONDS",
                     help="per-step host time added to every step")  # fmt: skip
    work = p.add_argument_group("workload")
    work.add_argument("--rate", type=positive_float, default=5.0, help="arrivals per second")
    work.add_argument("--rate-profile", type=_profile, metavar="START:RATE,...",
                      help="arrivals/s by time instead of --rate, e.g. 0:2,60:8,90:2")  # fmt: skip
    work.add_argument("--prompt-tokens", type=_lengths, default=Fixed(4096),
                      help="N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA")  # fmt: skip
    work.add_argument("--output-tokens", type=_lengths, default=Fixed(256),
                      help="N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA")  # fmt: skip
    work.add_argument("--shared-prefix-tokens", type=int, default=0,
                      help="system-prompt tokens every request shares (served from the prefix "
                           "cache, their KV held once)")  # fmt: skip
    work.add_argument("--workload", metavar="FILE",
                      help="replay a CSV (columns arrival_seconds, prompt_tokens, "
                           "output_tokens; optional cached_prompt_tokens, prefix_group) or a "
                           "`vllm bench serve` result JSON")  # fmt: skip
    work.add_argument("--duration", type=positive_float, default=60.0, metavar="SECONDS",
                      help="arrival window and simulated time")  # fmt: skip
    work.add_argument("--drain", action="store_true",
                      help="after --duration, run on until every request has finished")  # fmt: skip
    work.add_argument("--runs", metavar="RUNS.json",
                      help="simulate every run of an itlkit-runs/1 file instead (drained; one "
                           "JSON object per run per line)")  # fmt: skip
    work.add_argument("--calibration", metavar="FILE",
                      help="CALIBRATION.json from `itlkit calibrate`, 'bundled' (fitted "
                           "on real vLLM runs) or 'none'; default none (--runs: bundled)",
                      )  # fmt: skip
    work.add_argument("--seed", type=int, default=0, help="random seed (reproducible runs)")
    eng = p.add_argument_group("engine")
    eng.add_argument("--max-num-batched-tokens", type=positive_int, default=8192,
                     help="token budget per step, decode + prefill tokens")  # fmt: skip
    eng.add_argument("--max-num-seqs", type=positive_int,
                     help="default: min(1024, max_num_batched_tokens), as vLLM")  # fmt: skip
    eng.add_argument("--no-chunked-prefill", action="store_true", help="prefill prompts whole")
    eng.add_argument("--disaggregated", action="store_true",
                     help="prefill on another instance; decode steps carry no chunks")  # fmt: skip
    eng.add_argument("--kv-transfer-bandwidth", type=positive_float, default=50e9,
                     metavar="BYTES_PER_SECOND", help="prefill-to-decode KV link")  # fmt: skip
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object in SI units")
    out.add_argument("--prom-out", metavar="DIR", help="write vLLM /metrics scrapes here")
    out.add_argument("--openmetrics-out", metavar="FILE", help="write OpenMetrics for backfill")
    out.add_argument("--scrape-interval", type=positive_float, default=15.0, metavar="SECONDS",
                     help="time between exported scrapes")  # fmt: skip
    out.add_argument("--start-unix-seconds", type=float, default=None,
                     help="wall-clock time of simulated t = 0 in the exports "
                          "(default: that of the bundled examples)")  # fmt: skip
    p.set_defaults(func=run)


def run(args) -> int:
    """Simulate, print the report (or JSON), write exports; exit 0."""
    from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment

    if args.runs:
        from itlkit.cli._runs import simulate_runs

        return simulate_runs(args)
    _check(args)
    calibration = _calibration(args)
    dep = _calibrated(deployment_from_args(args), calibration)
    _check_memory(args, dep)
    config = SchedulerConfig(
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs or min(1024, args.max_num_batched_tokens),
        enable_chunked_prefill=not args.no_chunked_prefill,
        disaggregated=args.disaggregated,
        kv_transfer_bytes_per_second=args.kv_transfer_bandwidth,
    )
    result = simulate_deployment(
        _workload(args),
        deployment=dep,
        config=config,
        efficiency=calibration.efficiency if calibration else args.efficiency,
        host_overhead_seconds=None if calibration else args.host_overhead,
        until_seconds=None if args.drain else args.duration,
        jitter=_jitter(calibration, args.seed),
    )
    _check_something_finished(result)
    _export(args, result, model_name=dep.model.hf_id or dep.model.slug)
    if args.json:
        values = _json_values(result, dep, config)
        values["calibration"] = calibration.name if calibration else "none"
        print(json.dumps(values, indent=2))
    else:
        _print_report(result, dep, config, drained=args.drain)
        if calibration:
            print(calibration.describe())
    return 0


def _calibration(args):
    """The calibration asked for (None: the plain roofline with --efficiency/--host-overhead)."""
    if args.calibration in (None, "none"):
        return None
    if args.efficiency != 1.0 or args.host_overhead != 0.0:
        raise ConfigError("give either --calibration or --efficiency/--host-overhead, not both")
    from itlkit.cli._runs import load_calibration

    return load_calibration(args.calibration)


def _calibrated(dep, calibration):
    """The deployment with the calibration's host and all-reduce terms."""
    if calibration is None:
        return dep
    from dataclasses import replace

    return replace(
        dep,
        host_overhead_seconds=calibration.host_seconds_per_step,
        host_seconds_per_sequence=calibration.host_seconds_per_sequence,
        allreduce_latency_seconds=calibration.allreduce_for(dep.gpu),
    )


def _jitter(calibration, seed: int):
    from itlkit.sim.scheduler import step_jitter_factors

    return step_jitter_factors(calibration.step_jitter if calibration else 0.0, seed=seed)


def _check(args) -> None:
    if not args.efficiency <= 1:
        raise ConfigError(f"--efficiency must be in (0, 1], got {args.efficiency}")
    if args.host_overhead < 0 or not math.isfinite(args.host_overhead):
        raise ConfigError(f"--host-overhead must be >= 0 seconds, got {args.host_overhead}")
    start = args.start_unix_seconds
    if start is not None and not 9.46e8 <= start <= 4.1e9:
        raise ConfigError(
            f"--start-unix-seconds must be a Unix time between 2000 and 2099, got {start:g}"
        )
    if args.shared_prefix_tokens < 0:
        raise ConfigError(f"--shared-prefix-tokens must be >= 0, got {args.shared_prefix_tokens}")


MEMORY_LIMIT_BYTES = 4e9
_BYTES_PER_STEP = 64  # the engine's per-step records (measured: 75 MB for 4 h, ~1.2 M steps)
_BYTES_PER_REQUEST = 600  # per-request state and results


def _check_memory(args, dep) -> None:
    """Refuse, with the estimate, a simulation that would not fit in memory (before starting)."""
    from itlkit.physics.roofline import decode_step

    if args.workload:
        return  # a file's size already bounds its requests
    peak_rate = max(args.rate_profile.rates_per_second) if args.rate_profile else args.rate
    requests = peak_rate * args.duration
    fastest_step = float(decode_step(dep, batch_size=1, context_tokens=1).step_seconds)
    steps = args.duration / fastest_step
    needed = requests * _BYTES_PER_REQUEST + min(steps, requests * 8192) * _BYTES_PER_STEP
    if needed > MEMORY_LIMIT_BYTES:
        raise ConfigError(
            f"this run would simulate about {requests:,.0f} requests over up to {steps:,.0f} "
            f"steps and need about {needed / 1e9:,.1f} GB (limit {MEMORY_LIMIT_BYTES / 1e9:g} "
            "GB): shorten --duration or lower --rate"
        )


def _check_something_finished(result) -> None:
    if not result.finished.any():
        why = (
            "the workload is empty" if result.workload.num_requests == 0
            else f"none of its {result.workload.num_requests:,} requests could finish in "
            f"{result.end_seconds:g} s (a prompt longer than the KV cache, or too short "
            "a --duration)"
        )  # fmt: skip
        raise ConfigError(f"no request finished: {why}")


def _workload(args):
    from itlkit.sim.workload import read_workload, synthetic_workload

    if args.workload:
        return read_workload(args.workload, seed=args.seed)
    return synthetic_workload(
        duration_seconds=args.duration,
        rate_per_second=None if args.rate_profile else args.rate,
        profile=args.rate_profile,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        shared_prefix_tokens=args.shared_prefix_tokens,
        seed=args.seed,
    )


def _export(args, result, *, model_name: str) -> None:
    """Write the --prom-out scrapes and the --openmetrics-out file, if asked for."""
    if not (args.prom_out or args.openmetrics_out):
        return
    from itlkit.sim.export import (
        DEFAULT_START_UNIX_SECONDS,
        export_openmetrics,
        export_prometheus_scrapes,
    )

    start = args.start_unix_seconds
    export = dict(
        interval_seconds=args.scrape_interval,
        start_unix_seconds=DEFAULT_START_UNIX_SECONDS if start is None else start,
        model_name=model_name,
    )
    if args.prom_out:
        export_prometheus_scrapes(result, args.prom_out, **export)
    if args.openmetrics_out:
        export_openmetrics(result, args.openmetrics_out, **export)


def _buckets(histogram) -> list:
    return [
        ["+Inf" if math.isinf(le) else float(le), int(c)]
        for le, c in zip(histogram.upper_bounds, histogram.cumulative_counts, strict=True)
    ]


def _json_values(result, dep, config) -> dict:
    """The summary in SI units, Prometheus' ITL p99 and both histograms' buckets."""
    itl = result.itl_histogram()
    values = {k: _finite(v) for k, v in asdict(result.summary()).items()}
    values["itl_p99_prometheus_seconds"] = _finite(itl.quantile(0.99))
    values["itl_buckets"] = _buckets(itl)
    values["ttft_buckets"] = _buckets(result.ttft_histogram())
    values["deployment"] = dep.label
    values["config"] = asdict(config)
    return values


def _print_report(result, dep, config, *, drained: bool = False) -> None:
    summary = asdict(result.summary())
    itl = result.itl_histogram()
    print(f"{dep.label}; {_config_text(config)}")
    print(
        f"{summary['simulated_seconds']:.1f} s simulated, {summary['steps']} steps, "
        f"{summary['requests_finished']} requests finished, "
        f"{summary['requests_in_flight']} still in flight, {summary['preemptions']} preemptions"
    )
    if summary["requests_in_flight"] and not drained:
        print(f"  {summary['requests_in_flight']} requests were still in flight at the end and "
              "are in no statistic below; --drain runs on until they finish")  # fmt: skip
    for name in ("itl", "ttft", "e2e"):
        line = f"{name.upper():<5} mean {format_seconds(summary[f'{name}_mean_seconds']):>10}"
        if f"{name}_p50_seconds" in summary:
            line += f"   p50 {format_seconds(summary[f'{name}_p50_seconds']):>10}"
        line += f"   p99 {format_seconds(summary[f'{name}_p99_seconds']):>10}"
        print(line)
    print("ITL histogram (vLLM buckets, share of observations):")
    total = max(itl.count, 1)
    for lower, upper, count in zip(itl.lower_bounds, itl.upper_bounds, itl.bucket_counts,
                                   strict=True):  # fmt: skip
        if count:
            span = f"({format_seconds(lower)}, {format_seconds(upper)}]"
            print(f"  {span:<22} {count / total:6.1%}  {'#' * round(40 * count / total)}")


def _config_text(config) -> str:
    mode = "chunked prefill" if config.enable_chunked_prefill else "chunked prefill off"
    if config.disaggregated:
        mode += ", disaggregated prefill"
    return (
        f"max_num_batched_tokens {config.max_num_batched_tokens}, "
        f"max_num_seqs {config.max_num_seqs}, {mode}"
    )


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
