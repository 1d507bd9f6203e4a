"""`itlkit simulate`: run the scheduler simulator; report ITL, TTFT and e2e (or one JSON object)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_assumptions,
    deployment_from_args,
    fraction,
    number_between,
    seconds_at_most,
    seed,
    tokens,
    whole_number,
)
from itlkit.cli._engine_args import (
    ASSUMED_MAX_MODEL_LEN,
    add_engine_arguments,
    check_engine_flags,
    engine_settings,
    max_model_len,
)
from itlkit.cli._spec_args import (
    add_speculation_arguments,
    speculation_assumptions,
    speculation_from_args,
    speculation_text,
)
from itlkit.cli._traffic_args import LENGTHS_HELP, lengths, rate_profile
from itlkit.errors import ConfigError
from itlkit.sim.lengths import (
    Fixed,
    vllm_random_output_lengths,
    vllm_random_prompt_lengths,
)
from itlkit.sim.workload import MOST_CONCURRENCY
from itlkit.units import format_seconds

# The flags' ranges: wider than any real server, narrow enough that the simulation's arithmetic
# stays finite and its numbers mean something (a rate of 1e-320 is a typo, not a workload).
rate = number_between(1e-6, 1e6, "an arrival rate in requests/s")  # one a fortnight to 1M/s
duration = number_between(1e-3, 1e7, "a number of seconds")  # 1 ms to four months
host_overhead = seconds_at_most(1.0)  # real host time per step is 0.1-10 ms
scrape_interval = number_between(1e-3, 86_400.0, "a number of seconds")
MOST_SHARED_PREFIX_TOKENS = 10**8
MOST_SCRAPES = 20_000  # scrape files (or one file's scrapes): a 1-s interval over 5.5 h
MOST_PROMPTS = 10**7  # --num-prompts: vllm bench serve's runs send thousands


shared_prefix_tokens = whole_number(0, MOST_SHARED_PREFIX_TOKENS, "a number of tokens")
prefix_len = whole_number(0, MOST_SHARED_PREFIX_TOKENS, "a number of tokens")
num_prompts = whole_number(1, MOST_PROMPTS, "a number of prompts")
concurrency = whole_number(1, MOST_CONCURRENCY, "a number of requests in flight")
burstiness = number_between(1e-3, 1e3, "a burstiness factor")
range_ratio = number_between(0.0, 1.0, "a range ratio")
share = number_between(0.0, 1.0, "a share")
# `vllm bench serve --dataset-name random`'s defaults (RandomDataset in
# vllm/benchmarks/datasets.py, vllm-project/vllm @ 0056b87fc1fda2642f39dda4392824c425dd1638).
RANDOM_DEFAULTS = {"random_input_len": 1024, "random_output_len": 128, "random_range_ratio": 0.0,
                   "random_prefix_len": 0}  # fmt: skip
DEFAULT_PROMPT_TOKENS, DEFAULT_OUTPUT_TOKENS = 4096, 256
DEFAULT_RATE = 5.0  # requests/s


def _request_rate(text: str) -> float:
    """`vllm bench serve --request-rate`: requests/s, or inf (every request at t = 0)."""
    if text.strip().lower() in ("inf", "infinity"):
        return math.inf
    try:
        return rate(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or inf (all at t = 0)") from None


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
    add_deployment_arguments(dep, memory=True, link=True)
    dep.add_argument(
        "--efficiency",
        type=fraction,
        default=1.0,
        help="fraction of the roofline step speed the server reaches, 0.001 to 1",
    )
    dep.add_argument("--host-overhead", type=host_overhead, default=0.0, metavar="SECONDS",
                     help="per-step host time added to every step, 0 to 1 s")  # fmt: skip
    _add_workload_arguments(p)
    _add_client_arguments(p)
    add_engine_arguments(p)
    add_speculation_arguments(p)
    _add_output_arguments(p)
    # None: the version's default (or itlkit's 0.9), so that a given value can be told apart
    p.set_defaults(func=run, gpu_memory_utilization=None)


def _add_workload_arguments(p) -> None:
    """Who arrives when, with how many tokens, for how long (or the runs of a file)."""
    work = p.add_argument_group("workload")
    work.add_argument("--rate", type=rate, help=f"arrivals per second (default {DEFAULT_RATE:g})")
    work.add_argument("--rate-profile", type=rate_profile, metavar="START:RATE,...",
                      help="arrivals/s by time instead of --rate, e.g. 0:2,60:8,90:2")  # fmt: skip
    work.add_argument("--prompt-tokens", type=lengths,
                      help=f"{LENGTHS_HELP}; default {DEFAULT_PROMPT_TOKENS}")  # fmt: skip
    work.add_argument("--output-tokens", type=lengths,
                      help=f"{LENGTHS_HELP}; default {DEFAULT_OUTPUT_TOKENS}")  # fmt: skip
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


def _add_client_arguments(p) -> None:
    """The client as `vllm bench serve` drives a server: counts, rates, concurrency, lengths."""
    client = p.add_argument_group(
        "client (as vllm bench serve)",
        "--num-prompts sends a count of requests, as vllm bench serve does, and runs until the "
        "last finishes; --max-concurrency makes the client a closed loop (also with --rate)",
    )
    client.add_argument("--num-prompts", type=num_prompts, metavar="N",
                        help="send N requests at --request-rate (--rate) and run until all "
                             "have finished")  # fmt: skip
    client.add_argument("--request-rate", type=_request_rate, metavar="R|inf",
                        help="requests/s of --num-prompts (Poisson, rescaled so the last goes "
                             "at N / R, as vllm bench serve); inf: all at t = 0, a burst "
                             "(default: --rate)")  # fmt: skip
    client.add_argument("--burstiness", type=burstiness,
                        help="gamma shape of the gaps between sends with --num-prompts "
                             "(default 1: Poisson; < 1 burstier, > 1 more even)")  # fmt: skip
    client.add_argument("--max-concurrency", type=concurrency, metavar="N",
                        help="a closed loop: at most N requests in flight; each next one is sent "
                             "when one finishes (TTFT and E2E count from the send)")  # fmt: skip
    client.add_argument("--random-input-len", type=tokens, metavar="TOKENS",
                        help="--dataset-name random's prompt length (default 1024), drawn "
                             "from [floor(L(1-r)), ceil(L(1+r))], r: the range ratio")  # fmt: skip
    client.add_argument("--random-output-len", type=tokens, metavar="TOKENS",
                        help="--dataset-name random's output length (default 128)")  # fmt: skip
    client.add_argument("--random-range-ratio", type=range_ratio, metavar="R",
                        help="--dataset-name random's spread, in [0, 1) (default 0)")  # fmt: skip
    client.add_argument("--random-prefix-len", type=prefix_len, metavar="TOKENS",
                        help="--dataset-name random's prefix, the same for every request "
                             "(served from the prefix cache; default 0)")  # fmt: skip
    client.add_argument("--repeat-share", type=share, default=0.0, metavar="SHARE",
                        help="share of requests that resend an earlier request's prompt, "
                             "served from the prefix cache while it keeps it (0 to 1)")  # fmt: skip


def _add_output_arguments(p) -> None:
    """JSON, and the exports as vLLM /metrics scrapes or OpenMetrics."""
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


def run(args) -> int:
    """Simulate, print the report (or JSON), write exports; exit 0."""
    from itlkit.sim.scheduler import simulate_deployment

    if args.runs:
        from itlkit.cli._runs import simulate_runs

        if args.spec_k is not None:
            raise ConfigError("--spec-k describes one deployment; a --runs file gives each run's "
                              "own, and its format does not carry speculation yet")  # fmt: skip
        return simulate_runs(args)
    _check(args)
    check_engine_flags(args)
    _check_client(args)
    _check_outputs(args, args.duration)
    calibration = _calibration(args)
    settings = engine_settings(args)
    memory = {"gpu_memory_utilization": settings.gpu_memory_utilization}
    plain = deployment_from_args(args, **memory)
    settings, kv_tokens = _engine_memory(args, settings, plain)
    calibration = _calibration_for(args, calibration, plain, settings)
    dep = _calibrated(plain, calibration)
    _check_memory(args, dep, settings.max_num_batched_tokens)
    config = settings.scheduler_config(
        disaggregated=bool(args.disaggregated),
        kv_transfer_bytes_per_second=args.kv_transfer_bandwidth,
    )
    workload = _workload(args, dep)
    _check_workload(args, workload, config, settings)
    speculation = speculation_from_args(args) or _bench_speculation(args)
    drained = args.drain or args.num_prompts is not None
    result = simulate_deployment(
        workload,
        deployment=dep,
        config=config,
        efficiency=calibration.efficiency if calibration else args.efficiency,
        host_overhead_seconds=None if calibration else args.host_overhead,
        until_seconds=None if drained else args.duration,
        jitter=_jitter(calibration, args.seed),
        kv_tokens=kv_tokens,
        speculation=speculation,
        seed=args.seed,
    )
    if not result.finished.any():
        raise ConfigError(_none_finished(args, result, dep, calibration))
    _check_outputs(args, result.end_seconds)
    _export(args, result, model_name=dep.model.hf_id or dep.model.slug)
    delay = _client_delay(result, calibration)
    if args.json:
        values = _json_values(result, dep, config, delay)
        values["calibration"] = calibration.name if calibration else "none"
        values["calibration_scope"] = calibration.describe() if calibration else "none"
        values["vllm_version"] = settings.version.label if settings.version else None
        values["engine"] = settings.engine
        values["assumptions"] = list(_assumptions(args, dep, settings, workload, speculation))
        values["speculation"] = _speculation_values(speculation)
        print(json.dumps(values, indent=2))
    else:
        lines = _assumptions(args, dep, settings, workload, speculation)
        print("\n".join(f"assumed: {a}" for a in lines))
        _print_report(result, dep, _settings_text(settings, config), drained=drained,
                      delay=delay)  # fmt: skip
        if speculation is not None:
            print(speculation_text(speculation) + "; ITL above is vLLM's, one per step a "
                  "request took part in: per token and TPOT below")  # fmt: skip
        print(_definitions_text(result))
        if args.num_prompts is not None or args.max_concurrency is not None:
            print(_client_text(args, result))
        if calibration:
            print(calibration.describe())
    return 0


def _engine_memory(args, settings, dep):
    """The settings once the engine's KV pool is sized, and that pool in tokens where it is not
    vLLM's (None: `simulate_deployment` sizes vLLM's)."""
    if not hasattr(settings, "with_kv_tokens"):
        return settings, None
    from itlkit.physics.engine_memory import sglang_kv_cache

    kv = sglang_kv_cache(dep).kv_tokens
    if kv < 1:
        raise ConfigError(
            f"{dep.label}: the weights leave no KV pool in --mem-fraction-static "
            f"{settings.mem_fraction_static:g} of the GPU (SGLang would not start)"
        )
    context = max_model_len(args)
    return settings.with_kv_tokens(kv, context_tokens=context), kv


def _calibration_for(args, calibration, dep, settings):
    """The calibration's group for this GPU and engine, with what its runs did not cover."""
    if calibration is None:
        return None
    calibration = calibration.for_model(dep.gpu.slug, dep.model, settings.engine, settings.version)
    beyond = calibration.beyond(model=dep.model.size_class, client=_client_kind(args))
    if settings.engine not in ("V0", "V1") and settings.engine not in calibration.group:
        beyond = "; ".join(filter(None, (beyond, f"fitted on vLLM runs, not {settings.engine}'s "
                                         "(its host time per step is not measured)")))  # fmt: skip
    return replace(calibration, scope="; ".join(filter(None, (calibration.scope, beyond))))


def _client_kind(args) -> str:
    """The client as a calibration's coverage names it (`RunWorkload.client`)."""
    if args.max_concurrency is not None:
        return "closed loop"
    return "burst" if args.request_rate == math.inf else "open loop"


def _calibration(args):
    """The calibration asked for (None: the plain roofline with --efficiency/--host-overhead)."""
    if args.calibration in (None, "none"):
        return None
    if args.efficiency != 1.0 or args.host_overhead != 0.0:
        raise ConfigError("give either --calibration or --efficiency/--host-overhead, not both")
    from itlkit.cli._runs import load_calibration

    return load_calibration(args.calibration)


def _calibrated(dep, calibration):
    """The deployment with the calibration's host and all-reduce terms and step model."""
    return dep if calibration is None else calibration.apply(dep)


def _jitter(calibration, seed: int):
    from itlkit.sim.scheduler import step_jitter_factors

    return step_jitter_factors(calibration.step_jitter if calibration else 0.0, seed=seed)


def _check(args) -> None:
    start = args.start_unix_seconds
    if start is not None and not 9.46e8 <= start <= 4.1e9:
        raise ConfigError(
            f"--start-unix-seconds must be a Unix time between 2000 and 2099, got {start:g}"
        )


def _check_client(args) -> None:
    """Refuse client flags that contradict each other, naming both."""
    pairs = (
        ("--request-rate", args.request_rate, "--rate-profile", args.rate_profile),
        ("--num-prompts", args.num_prompts, "--rate-profile", args.rate_profile),
        ("--num-prompts", args.num_prompts, "--workload", args.workload),
        ("--request-rate", args.request_rate, "--workload", args.workload),
        ("--repeat-share", args.repeat_share or None, "--workload", args.workload),
        ("--max-concurrency", args.max_concurrency, "--disaggregated", args.disaggregated or None),
        ("--random-prefix-len", args.random_prefix_len, "--shared-prefix-tokens",
         args.shared_prefix_tokens or None),
        ("--request-rate", args.request_rate, "--rate", args.rate),
    )  # fmt: skip
    for flag, value, other, other_value in pairs:
        if value is not None and other_value is not None:
            raise ConfigError(f"give {flag} or {other}, not both")
    random = [f"--{k.replace('_', '-')}" for k in RANDOM_DEFAULTS if getattr(args, k) is not None]
    lengths = [f for f, v in (("--prompt-tokens", args.prompt_tokens),
                             ("--output-tokens", args.output_tokens)) if v is not None]  # fmt: skip
    if random and lengths:
        raise ConfigError(
            f"give {random[0]} (vllm bench serve's random dataset, both lengths) or {lengths[0]}, "
            "not both"
        )
    if args.request_rate == math.inf and args.num_prompts is None:
        raise ConfigError(
            "--request-rate inf sends every request at t = 0 and needs --num-prompts (how many)"
        )
    if args.burstiness is not None and args.num_prompts is None:
        raise ConfigError("--burstiness shapes the sends of --num-prompts; give --num-prompts")


def _check_outputs(args, seconds: float) -> None:
    """Refuse, before the work (and again once the run's end is known), exports that cannot be
    written or would write too many scrapes."""
    if not (args.prom_out or args.openmetrics_out):
        return  # (and the exporters, prometheus_client among them, are not imported)
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


def _bench_speculation(args):
    """A replayed bench file's own speculation (its server's counters), when no --spec-k is
    given: its drafts a step and per-position acceptance, priced as --spec-method says."""
    if not (args.workload and args.workload.endswith(".json")):
        return None
    from itlkit.metrics.bench import read_bench_result
    from itlkit.physics.speculative import measured_overheads

    reading = read_bench_result(args.workload).speculation
    if reading is None:
        return None
    if reading.per_position is None:
        raise ConfigError(
            f"{args.workload}: its server speculated ({reading.tokens_per_step:.2f} tokens a "
            "step) but the file gives no per-position acceptance: pass --spec-k K and "
            f"--spec-mean-length {reading.tokens_per_step:.2f}"
        )
    overheads = measured_overheads(args.spec_method)
    extra, per_pass = overheads["verify_extra_seconds"], overheads["draft_pass_seconds"]
    args.spec_from_bench = (
        f"speculation from {args.workload}: k {reading.positions}, acceptance per position "
        + ", ".join(f"{r:.2f}" for r in reading.per_position)
        + f" ({reading.tokens_per_step:.2f} tokens a step); drafts priced as --spec-method "
        f"{args.spec_method}"
        + (f" ({extra * 1e3:.2f} ms a verification step + {per_pass * 1e3:.2f} ms a draft pass,"
           " measured elsewhere)" if extra or per_pass else "")
    )  # fmt: skip
    return reading.speculation(method=args.spec_method, draft_params=args.spec_draft_params,
                               **overheads)  # fmt: skip


def _assumptions(args, dep, settings, workload, speculation=None) -> list[str]:
    """Every default taken, and what the settings do not say: the 'assumed:' lines."""
    said = deployment_assumptions(args, dep)
    lines = [*said, *settings.assumptions]
    if speculation is not None:
        lines += speculation_assumptions(args)
        if getattr(args, "spec_from_bench", None):
            lines.append(args.spec_from_bench)
        lines.append(
            "speculation: accepted drafts drawn per request per step from the acceptance given "
            "(seed --seed); each decode takes k + 1 tokens of the budget; the KV a step reads "
            "grows by the tokens emitted (a mean over the workload); the draft's own KV and "
            "vLLM's k lookahead slots per request are not counted"
        )
    follows = settings.version is not None or getattr(settings, "follows_context_length", False)
    if follows and args.max_model_len is None:
        at = len(said) + 1
        lines.insert(at, f"max_model_len {ASSUMED_MAX_MODEL_LEN:,} (not given: --max-model-len; "
                        "the server takes the model's context length, which itlkit's catalog "
                        "does not hold)")  # fmt: skip
    if not settings.enable_prefix_caching and workload.cached_prompt_tokens.any():
        lines.append(
            "prefix caching is off by the version's default, yet the workload's cached prompt "
            "tokens (--shared-prefix-tokens, --random-prefix-len, --repeat-share or the "
            "replayed file's) are served from a prefix cache, as with --enable-prefix-caching"
        )
    return lines


MEMORY_LIMIT_BYTES = 4e9
_BYTES_PER_STEP = 64  # the engine's per-step records (measured: 75 MB for 4 h, ~1.2 M steps)
_BYTES_PER_REQUEST = 600  # per-request state and results


def _check_memory(args, dep, budget: int) -> None:
    """Refuse, with the estimate, a simulation that would not fit in memory (before starting)."""
    from itlkit.physics.roofline import decode_step

    if args.workload:
        return  # a file's size already bounds its requests
    if args.num_prompts is not None:  # run until the last finishes: at worst one at a time
        requests = args.num_prompts
        prompt, output = _lengths_from_args(args)[:2]
        prefill = math.ceil(prompt.mean_tokens / budget)
        steps = requests * (output.mean_tokens + prefill)
        needed = requests * _BYTES_PER_REQUEST + steps * _BYTES_PER_STEP
        lower = "fewer --num-prompts"
    else:
        peak_rate = max(args.rate_profile.rates_per_second) if args.rate_profile else _rate(args)
        requests = peak_rate * args.duration
        fastest_step = float(decode_step(dep, batch_size=1, context_tokens=1).step_seconds)
        steps = args.duration / fastest_step
        needed = requests * _BYTES_PER_REQUEST + min(steps, requests * 8192) * _BYTES_PER_STEP
        lower = "lower --rate-profile's peak rate" if args.rate_profile else "lower --rate"
        lower = f"shorten --duration or {lower}"
    if needed > MEMORY_LIMIT_BYTES:
        raise ConfigError(
            f"this run would simulate about {requests:,.0f} requests over up to {steps:,.0f} "
            f"steps and need about {needed / 1e9:,.1f} GB (limit {MEMORY_LIMIT_BYTES / 1e9:g} "
            f"GB): {lower}"
        )


def _check_workload(args, workload, config, settings) -> None:
    """Refuse a workload with no request, and one that vLLM would not serve as configured."""
    if workload.num_requests == 0:
        if args.workload:
            raise ConfigError(f"{args.workload}: the file holds no request to replay")
        if args.rate_profile:
            profile = args.rate_profile
            pairs = zip(profile.start_seconds, profile.rates_per_second, strict=True)
            sends = "--rate-profile " + ",".join(f"{a:g}:{b:g}" for a, b in pairs)
        else:
            sends = f"--rate {_rate(args):g} requests/s"
        raise ConfigError(
            f"{sends} sends no request within --duration {args.duration:g} s; raise either"
        )
    need = workload.prompt_tokens + workload.output_tokens
    i = int(need.argmax())
    if (args.max_model_len or settings.version) and need[i] > max_model_len(args):
        given = "--max-model-len" if args.max_model_len else "max_model_len (assumed)"
        raise ConfigError(
            f"{workload.request_name(i)} has {int(need[i]):,} tokens (prompt "
            f"{int(workload.prompt_tokens[i]):,} + output {int(workload.output_tokens[i]):,}), "
            f"more than {given} {max_model_len(args):,}, and vLLM refuses such requests: give "
            "--max-model-len of at least that"
        )
    if not config.enable_chunked_prefill:
        off = "--no-chunked-prefill" if args.chunked_prefill is False else "chunked prefill off"
        if need[i] > config.max_num_batched_tokens:
            raise ConfigError(
                f"{off} needs --max-num-batched-tokens of at least max_model_len "
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


def _rate(args) -> float:
    """The arrival rate: --request-rate (vLLM's name, may be inf), else --rate, else 5/s."""
    if args.request_rate is not None:
        return args.request_rate
    return DEFAULT_RATE if args.rate is None else args.rate


def _lengths_from_args(args) -> tuple:
    """(prompt lengths, output lengths, shared prefix tokens): --prompt-tokens/--output-tokens,
    or vllm bench serve's --dataset-name random when any --random-* flag is given."""
    given = {k: getattr(args, k) for k in RANDOM_DEFAULTS if getattr(args, k) is not None}
    if not given:
        prompt = args.prompt_tokens or Fixed(DEFAULT_PROMPT_TOKENS)
        output = args.output_tokens or Fixed(DEFAULT_OUTPUT_TOKENS)
        return prompt, output, args.shared_prefix_tokens
    r = {**RANDOM_DEFAULTS, **given}
    prompt = vllm_random_prompt_lengths(input_len=r["random_input_len"],
                                        range_ratio=r["random_range_ratio"],
                                        prefix_len=r["random_prefix_len"])  # fmt: skip
    output = vllm_random_output_lengths(output_len=r["random_output_len"],
                                        range_ratio=r["random_range_ratio"])  # fmt: skip
    return prompt, output, r["random_prefix_len"] or args.shared_prefix_tokens


def _workload(args, dep):
    from dataclasses import replace

    import numpy as np

    from itlkit.sim.run_workload import repeat_prompts
    from itlkit.sim.scheduler import kv_capacity_tokens
    from itlkit.sim.workload import bench_workload, read_workload, synthetic_workload

    if args.workload:
        workload = read_workload(args.workload, seed=args.seed)
        if args.max_concurrency is not None:
            workload = replace(workload, max_concurrency=args.max_concurrency)
        return workload
    prompt, output, shared = _lengths_from_args(args)
    if args.num_prompts is not None:
        workload = bench_workload(
            num_prompts=args.num_prompts,
            request_rate_per_second=_rate(args),
            burstiness=1.0 if args.burstiness is None else args.burstiness,
            max_concurrency=args.max_concurrency,
            prompt_tokens=prompt,
            output_tokens=output,
            shared_prefix_tokens=shared,
            seed=args.seed,
        )
    else:
        workload = synthetic_workload(
            duration_seconds=args.duration,
            rate_per_second=None if args.rate_profile else _rate(args),
            profile=args.rate_profile,
            prompt_tokens=prompt,
            output_tokens=output,
            shared_prefix_tokens=shared,
            max_concurrency=args.max_concurrency,
            seed=args.seed,
        )
    if not args.repeat_share or not workload.num_requests:
        return workload
    # The prefix cache may keep what the KV cache holds (vLLM's free blocks); its own stream,
    # so that the repeats do not echo the arrivals' draws.
    return repeat_prompts(workload, share=args.repeat_share, block_size=16,
                          capacity_blocks=max(kv_capacity_tokens(dep) // 16, 1),
                          seed=np.random.default_rng((args.seed, 1)))  # fmt: skip


def _client_text(args, result) -> str:
    """The client's line of the report: what it had to send, and what a closed loop sent."""
    w = result.workload
    rate = _rate(args)
    text = (f"client: {w.num_requests:,} requests at "
            f"{'inf' if math.isinf(rate) else f'{rate:g}'} requests/s")  # fmt: skip
    if args.max_concurrency is not None:
        sent = w.arrival_seconds[result.arrived]
        last = f", the last at {sent[-1]:.3f} s" if sent.size else ""
        text += f", at most {args.max_concurrency:,} in flight (closed loop): {sent.size:,} sent"
        text += last
    return text


def _export(args, result, *, model_name: str) -> None:
    """Write the --prom-out scrapes and the --openmetrics-out file, if asked for, in the names
    of the engine simulated."""
    if not (args.prom_out or args.openmetrics_out):
        return
    from itlkit.sim.export import (
        DEFAULT_START_UNIX_SECONDS,
        export_openmetrics,
        export_prometheus_scrapes,
    )
    from itlkit.sim.export_sglang import export_sglang_openmetrics, export_sglang_scrapes

    start = args.start_unix_seconds
    export = dict(
        interval_seconds=args.scrape_interval,
        start_unix_seconds=DEFAULT_START_UNIX_SECONDS if start is None else start,
        model_name=model_name,
    )
    sglang = args.engine == "sglang"
    if args.prom_out:
        (export_sglang_scrapes if sglang else export_prometheus_scrapes)(
            result, args.prom_out, **export)  # fmt: skip
    if args.openmetrics_out:
        (export_sglang_openmetrics if sglang else export_openmetrics)(
            result, args.openmetrics_out, **export)  # fmt: skip


def _speculation_values(spec) -> dict | None:
    if spec is None:
        return None
    return {"method": spec.method, "k": spec.k, "draft_params": spec.draft_params,
            "acceptance_per_position": [float(p) for p in spec.per_position],
            "tokens_per_step": spec.tokens_per_step}  # fmt: skip


def _buckets(histogram) -> list:
    return [
        ["+Inf" if math.isinf(le) else float(le), int(c)]
        for le, c in zip(histogram.upper_bounds, histogram.cumulative_counts, strict=True)
    ]


def _client_delay(result, calibration):
    """Per request, the calibration's TTFT pipeline (None: no calibration, or one without it):
    the client's TTFT and e2e include it, as `simulate --runs` predicts them."""
    if calibration is None or not (calibration.ttft_pipeline_steps
                                   or calibration.ttft_pipeline_seconds):  # fmt: skip
        return None
    from itlkit.calibration.predict import pipeline_delay_seconds

    return pipeline_delay_seconds(result, calibration)


def _mean_delay(delay) -> float:
    import numpy as np

    return float(np.nanmean(delay)) if delay is not None and delay.size else 0.0


def _pipeline_text(delay) -> str:
    mean = _mean_delay(delay)
    return (f"TTFT and E2E include the calibration's TTFT pipeline, {format_seconds(mean)} a "
            "request on average: what a client waits beyond the engine (API server, tokenizer, "
            "detokenizer); the histograms and exported pages are the engine's")  # fmt: skip


def _json_values(result, dep, config, delay=None) -> dict:
    """The summary in SI units (TTFT and e2e with the client's `delay`), Prometheus' ITL p99
    and both histograms' buckets (the engine's)."""
    itl = result.itl_histogram()
    values = {k: _finite(v) for k, v in asdict(result.summary(delay)).items()}
    values["ttft_pipeline_mean_seconds"] = _finite(_mean_delay(delay))
    values["itl_p99_prometheus_seconds"] = _finite(itl.quantile(0.99))
    values["itl_buckets"] = _buckets(itl)
    values["ttft_buckets"] = _buckets(result.ttft_histogram())
    values["deployment"] = dep.label
    values["config"] = asdict(config)
    values["itl_definitions"] = _definitions(result)
    return values


def _definitions(result) -> dict:
    """The run's ITL as each engine, client and benchmark counts it (`itl_vocabulary`)."""
    from itlkit.metrics.itl_vocabulary import DEFINITIONS

    v = result.itl_views()
    return {
        key: {"who": d.who, "per": d.per, "mean_seconds": _finite(v.mean(key)),
              "p50_seconds": _finite(v.quantile(key, 0.5)),
              "p99_seconds": _finite(v.quantile(key, 0.99))}
        for key, d in DEFINITIONS.items()
    }  # fmt: skip


def _definitions_text(result) -> str:
    """One line: the run's ITL p99 by each definition."""
    d = _definitions(result)

    def p99(key: str) -> str:
        value = d[key]["p99_seconds"]
        return "-" if value is None else format_seconds(value)

    return (
        f"ITL p99 by who counts it: vLLM per output {p99('vllm_event')}, "
        f"SGLang per token {p99('sglang_token')}, client per chunk {p99('client_chunk')}; "
        f"TPOT per finished request p99 {p99('request_tpot')} (= MLPerf P99-TPOT)"
    )


def _print_report(result, dep, settings_text: str, *, drained: bool = False,
                  delay=None) -> None:  # fmt: skip
    summary = asdict(result.summary(delay))
    itl = result.itl_histogram()
    print(f"{dep.label}; {settings_text}")
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
    if delay is not None:
        print(_pipeline_text(delay))
    print("ITL histogram (vLLM buckets, share of observations):")
    total = max(itl.count, 1)
    for lower, upper, count in zip(itl.lower_bounds, itl.upper_bounds, itl.bucket_counts,
                                   strict=True):  # fmt: skip
        if count:
            span = f"({format_seconds(lower)}, {format_seconds(upper)}]"
            print(f"  {span:<22} {count / total:6.1%}  {'#' * round(40 * count / total)}")


def _settings_text(settings, config) -> str:
    """The engine's settings in its own names."""
    return settings.describe() if hasattr(settings, "describe") else _config_text(config)


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
