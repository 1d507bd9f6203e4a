"""`itlkit simulate`: run the scheduler simulator; report ITL, TTFT and e2e (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_from_args,
    fraction,
    number_between,
    seconds_at_most,
    seed,
    sequences,
    shown,
    tokens,
    whole_number,
)
from itlkit.errors import ConfigError
from itlkit.sim.workload import Fixed, LogNormal, RateProfile, Uniform
from itlkit.units import format_seconds

# The flags' ranges: wider than any real server, narrow enough that the simulation's arithmetic
# stays finite and its numbers mean something (a rate of 1e-320 is a typo, not a workload).
rate = number_between(1e-6, 1e6, "an arrival rate in requests/s")  # one a fortnight to 1M/s
duration = number_between(1e-3, 1e7, "a number of seconds")  # 1 ms to four months
host_overhead = seconds_at_most(1.0)  # real host time per step is 0.1-10 ms
kv_bandwidth = number_between(1e6, 1e13, "a bandwidth in bytes/s")  # 1 MB/s to 10 TB/s
scrape_interval = number_between(1e-3, 86_400.0, "a number of seconds")
profile_start = number_between(0.0, 1e7, "a start time in seconds")
profile_rate = number_between(0.0, 1e6, "an arrival rate in requests/s")
MOST_SHARED_PREFIX_TOKENS = 10**8
MOST_SCRAPES = 20_000  # scrape files (or one file's scrapes): a 1-s interval over 5.5 h


shared_prefix_tokens = whole_number(0, MOST_SHARED_PREFIX_TOKENS, "a number of tokens")
_LENGTHS_HELP = "N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA (tokens)"


def _lengths(text: str):
    """`4096`, `uniform:LOW:HIGH` or `lognormal:MEDIAN:SIGMA` (tokens)."""
    kind, *values = text.split(":")
    try:
        if not values:
            return Fixed(tokens(kind))
        if kind == "uniform" and len(values) == 2:
            return Uniform(*(tokens(v) for v in values))
        if kind == "lognormal" and len(values) == 2:
            return LogNormal(*(_number(v, text) for v in values))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc}") from None
    raise argparse.ArgumentTypeError(f"{shown(text)} is not {_LENGTHS_HELP}")


def _number(text: str, whole: str) -> float:
    try:
        return float(text) if len(text) <= 40 else math.nan
    except ValueError:
        message = f"{shown(text)} in {shown(whole)} is not a number"
        raise argparse.ArgumentTypeError(message) from None


def _profile(text: str) -> RateProfile:
    """`START:RATE,START:RATE,...` (seconds, requests/s), starting at 0."""
    starts, rates = [], []
    for item in text.split(","):
        pair = item.split(":")
        if len(pair) != 2:
            where = "" if item == text else f" in {shown(text)}"
            raise argparse.ArgumentTypeError(
                f"{shown(item)}{where} is not START:RATE (seconds from 0, requests/s), as in "
                "0:2,60:8,90:2"
            )
        starts.append(profile_start(pair[0]))
        rates.append(profile_rate(pair[1]))
    try:
        return RateProfile(tuple(starts), tuple(rates))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc}") from None


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
        type=fraction,
        default=1.0,
        help="fraction of the roofline step speed the server reaches, 0.001 to 1",
    )
    dep.add_argument("--host-overhead", type=host_overhead, default=0.0, metavar="SECONDS",
                     help="per-step host time added to every step, 0 to 1 s")  # fmt: skip
    work = p.add_argument_group("workload")
    work.add_argument("--rate", type=rate, default=5.0, help="arrivals per second")
    work.add_argument("--rate-profile", type=_profile, metavar="START:RATE,...",
                      help="arrivals/s by time instead of --rate, e.g. 0:2,60:8,90:2")  # fmt: skip
    work.add_argument("--prompt-tokens", type=_lengths, default=Fixed(4096), help=_LENGTHS_HELP)
    work.add_argument("--output-tokens", type=_lengths, default=Fixed(256), help=_LENGTHS_HELP)
    work.add_argument("--shared-prefix-tokens", type=shared_prefix_tokens, default=0,
                      help="system-prompt tokens every request shares (served from the prefix "
                           "cache, their KV held once)")  # fmt: skip
    work.add_argument("--workload", metavar="FILE",
                      help="replay a CSV (columns arrival_seconds, prompt_tokens, "
                           "output_tokens; optional cached_prompt_tokens, prefix_group) or a "
                           "`vllm bench serve` result JSON")  # fmt: skip
    work.add_argument("--duration", type=duration, default=60.0, metavar="SECONDS",
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
    work.add_argument("--seed", type=seed, default=0, help="random seed (reproducible runs)")
    eng = p.add_argument_group("engine")
    eng.add_argument("--max-num-batched-tokens", type=tokens, default=8192,
                     help="token budget per step, decode + prefill tokens")  # fmt: skip
    eng.add_argument("--max-num-seqs", type=sequences,
                     help="default: min(1024, max_num_batched_tokens), as vLLM")  # fmt: skip
    eng.add_argument("--no-chunked-prefill", action="store_true",
                     help="prefill prompts whole (vLLM then needs --max-num-batched-tokens of at "
                          "least every request's prompt + output)")  # fmt: skip
    eng.add_argument("--disaggregated", action="store_true",
                     help="prefill on another instance; decode steps carry no chunks")  # fmt: skip
    eng.add_argument("--kv-transfer-bandwidth", type=kv_bandwidth, default=50e9,
                     metavar="BYTES_PER_SECOND", help="prefill-to-decode KV link")  # fmt: skip
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object in SI units")
    out.add_argument("--prom-out", metavar="DIR",
                     help="write vLLM /metrics scrapes into this new or scrape-free "
                          "folder")  # fmt: skip
    out.add_argument("--openmetrics-out", metavar="FILE", help="write OpenMetrics for backfill")
    out.add_argument("--scrape-interval", type=scrape_interval, default=15.0, metavar="SECONDS",
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
    _check_outputs(args, args.duration)
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
    workload = _workload(args)
    _check_workload(args, workload, config)
    result = simulate_deployment(
        workload,
        deployment=dep,
        config=config,
        efficiency=calibration.efficiency if calibration else args.efficiency,
        host_overhead_seconds=None if calibration else args.host_overhead,
        until_seconds=None if args.drain else args.duration,
        jitter=_jitter(calibration, args.seed),
    )
    if not result.finished.any():
        raise ConfigError(_none_finished(args, result, dep, calibration))
    _check_outputs(args, result.end_seconds)
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
    start = args.start_unix_seconds
    if start is not None and not 9.46e8 <= start <= 4.1e9:
        raise ConfigError(
            f"--start-unix-seconds must be a Unix time between 2000 and 2099, got {start:g}"
        )


def _check_outputs(args, seconds: float) -> None:
    """Refuse, before the work (and again once the run's end is known), exports that cannot be
    written or would write too many scrapes."""
    from itlkit.sim.export import output_problem

    for flag, path, folder in (("--prom-out", args.prom_out, True),
                               ("--openmetrics-out", args.openmetrics_out, False)):  # fmt: skip
        problem = path and output_problem(path, folder=folder)
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}")
    if args.prom_out and Path(args.prom_out).is_dir():
        earlier = len(list(Path(args.prom_out).glob("metrics-*.prom")))
        if earlier:
            raise ConfigError(
                f"--prom-out {args.prom_out}: already holds {earlier:,} scrapes (metrics-*.prom) "
                "of an earlier export, which a reader would mix with this run's; give an empty "
                "or new folder"
            )
    scrapes = math.ceil(seconds / args.scrape_interval) + 1
    if (args.prom_out or args.openmetrics_out) and scrapes > MOST_SCRAPES:
        raise ConfigError(
            f"--scrape-interval {args.scrape_interval:g} s over a {seconds:g}-s run would write "
            f"{scrapes:,} scrapes; at most {MOST_SCRAPES:,}: give an interval of at least "
            f"{seconds / (MOST_SCRAPES - 1):.3g} s"
        )


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
        lower = "lower --rate-profile's peak rate" if args.rate_profile else "lower --rate"
        raise ConfigError(
            f"this run would simulate about {requests:,.0f} requests over up to {steps:,.0f} "
            f"steps and need about {needed / 1e9:,.1f} GB (limit {MEMORY_LIMIT_BYTES / 1e9:g} "
            f"GB): shorten --duration or {lower}"
        )


def _check_workload(args, workload, config) -> None:
    """Refuse a workload with no request, and one that vLLM would not serve as configured."""
    if workload.num_requests == 0:
        if args.workload:
            raise ConfigError(f"{args.workload}: the file holds no request to replay")
        if args.rate_profile:
            profile = args.rate_profile
            pairs = zip(profile.start_seconds, profile.rates_per_second, strict=True)
            sends = "--rate-profile " + ",".join(f"{a:g}:{b:g}" for a, b in pairs)
        else:
            sends = f"--rate {args.rate:g} requests/s"
        raise ConfigError(
            f"{sends} sends no request within --duration {args.duration:g} s; raise either"
        )
    if not config.enable_chunked_prefill:
        need = workload.prompt_tokens + workload.output_tokens
        i = int(need.argmax())
        if need[i] > config.max_num_batched_tokens:
            raise ConfigError(
                "--no-chunked-prefill needs --max-num-batched-tokens of at least max_model_len "
                "(vLLM's SchedulerConfig refuses to start otherwise), and max_model_len must hold "
                f"every request: {workload.request_name(i)} has {int(need[i]):,} tokens (prompt "
                f"{int(workload.prompt_tokens[i]):,} + output {int(workload.output_tokens[i]):,}); "
                f"raise --max-num-batched-tokens from {config.max_num_batched_tokens:,} to "
                f"{int(need[i]):,}, or leave chunked prefill on"
            )


def _none_finished(args, result, dep, calibration) -> str:
    """Why no request finished: the first request's steps, and the settings that slowed them."""
    w, config = result.workload, result.config
    prefill = int(w.prompt_tokens[0] - w.cached_prompt_tokens[0])
    budget = config.max_num_batched_tokens
    prefill_steps = math.ceil(prefill / budget) if config.enable_chunked_prefill else 1
    steps = prefill_steps + int(w.output_tokens[0]) - 1
    took = (f"they took {format_seconds(float(result.step_duration_seconds.mean()))} on average"
            if result.steps else "none ran")  # fmt: skip
    causes = _slowing_settings(args, calibration)
    if prefill_steps > _MANY_PREFILL_STEPS:
        causes.append(f"--max-num-batched-tokens {budget:,} cuts its {prefill:,}-token prompt "
                      f"into {prefill_steps:,} steps")  # fmt: skip
    if config.disaggregated:
        bandwidth = config.kv_transfer_bytes_per_second
        moved = prefill * dep.model.kv_bytes_per_token(dep.kv) / bandwidth
        causes.append(f"its KV transfer takes {format_seconds(moved)} at "
                      f"--kv-transfer-bandwidth {bandwidth:g} B/s")  # fmt: skip
    why = f" ({'; '.join(causes)})" if causes else ""
    return (
        f"no request finished: none of its {w.num_requests:,} requests finished in "
        f"{result.end_seconds:g} s; the first needs about {steps:,} steps, and {took}{why}: "
        "give a longer --duration, or --drain"
    )


_MANY_PREFILL_STEPS = 16  # a 4,096-token prompt at a 256-token budget: worth naming the budget


def _slowing_settings(args, calibration) -> list[str]:
    """The step-time flags set slower than their defaults, each with how much slower."""
    causes = []
    if calibration is None and args.efficiency < 1:
        causes.append(f"--efficiency {args.efficiency:g} makes each step "
                      f"{1 / args.efficiency:,.0f}x the roofline's")  # fmt: skip
    if calibration is None and args.host_overhead > 0:
        causes.append(f"--host-overhead adds {format_seconds(args.host_overhead)} to each step")
    default_mfu = 0.5  # add_deployment_arguments' default
    if args.mfu < default_mfu:
        causes.append(f"--mfu {args.mfu:g} makes prefill compute {default_mfu / args.mfu:,.0f}x "
                      f"slower than at {default_mfu:g}")  # fmt: skip
    return causes


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
