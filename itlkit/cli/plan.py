"""`itlkit plan`: the cheapest deployment that meets an ITL p99 and a TTFT p99 target."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from itlkit.cli._args import number_between, seed, shown
from itlkit.cli._traffic_args import LENGTHS_HELP, lengths, rate_profile
from itlkit.units import format_seconds

DEFAULT_CACHE = Path(".itlkit-plan-cache")


def _list(kind):
    """An argparse type: comma-separated values, each parsed by `kind`."""

    def parse(text: str) -> tuple:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise ValueError(f"{shown(text)}: give at least one value")
        return tuple(kind(item) for item in items)

    return parse


def _on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise ValueError(f"{shown(text)}: give on or off")
    return text == "on"


def add_parser(subparsers) -> None:
    """Register `itlkit plan`."""
    p = subparsers.add_parser(
        "plan",
        help="the cheapest deployment that meets both latency SLOs, over a space of candidates",
        description="Prune by the roofline, simulate the rest (a process pool), rank by cost.",
    )
    p.add_argument("--model", default="llama-3.1-8b", help="catalog model")
    traffic = p.add_argument_group("traffic (Poisson arrivals, split evenly over replicas)")
    traffic.add_argument("--rate", type=number_between(1e-6, 1e6, "requests/s"),
                         help="requests per second at the peak")  # fmt: skip
    traffic.add_argument("--rate-profile", type=rate_profile, metavar="START:RATE,...",
                         help="rates by time instead of --rate, e.g. 0:4,60:12")  # fmt: skip
    traffic.add_argument("--incident", metavar="SCRAPES",
                         help="an incident's traffic: a folder of /metrics scrapes (arrivals "
                              "per window, mean lengths: as the what-if replays it)")  # fmt: skip
    traffic.add_argument("--prometheus", metavar="URL",
                         help="an incident's traffic from a Prometheus server, over --start and "
                              "--end (as --incident reads scrapes)")  # fmt: skip
    traffic.add_argument("--start", help="the period's start (RFC 3339 or Unix seconds)")
    traffic.add_argument("--end", help="the period's end")
    traffic.add_argument("--run", metavar="RUNS.json:ID",
                         help="the traffic of one run of an itlkit-runs/1 file (its client's "
                              "arrivals, lengths and repeated prompts)")  # fmt: skip
    traffic.add_argument("--workload", metavar="FILE",
                         help="replay a CSV or a vllm bench serve result instead (its arrivals "
                              "and lengths, dealt round-robin to the replicas)")  # fmt: skip
    traffic.add_argument("--prompt-tokens", type=lengths, default=lengths("1024"),
                         help=LENGTHS_HELP)  # fmt: skip
    traffic.add_argument("--output-tokens", type=lengths, default=lengths("256"),
                         help=LENGTHS_HELP)  # fmt: skip
    traffic.add_argument("--duration", type=number_between(1.0, 86400.0, "seconds"),
                         default=120.0,
                         help="seconds of traffic simulated per candidate")  # fmt: skip
    traffic.add_argument("--seed", type=seed, default=0)
    slo = p.add_argument_group("SLOs (seconds)")
    slo.add_argument("--itl-p99", type=number_between(1e-6, 3600.0, "seconds"))
    slo.add_argument("--ttft-p99", type=number_between(1e-6, 3600.0, "seconds"))
    slo.add_argument("--e2e-p99", type=number_between(1e-6, 86400.0, "seconds"),
                     help="arrival to last token")  # fmt: skip
    slo.add_argument("--tpot-p99", type=number_between(1e-6, 3600.0, "seconds"),
                     help="per token, per finished request (what speculation lowers)")  # fmt: skip
    space = p.add_argument_group("candidate space (comma-separated choices)")
    space.add_argument("--gpus", type=_list(str), default=("h100-sxm",))
    space.add_argument("--tp", type=_list(int), default=(1,))
    space.add_argument("--replicas", type=_list(int), default=(1,))
    space.add_argument("--weights-precision", type=_list(str), default=("bf16",))
    space.add_argument("--kv-precision", type=_list(str), default=("bf16",))
    space.add_argument("--max-num-batched-tokens", type=_list(int), default=(8192,))
    space.add_argument("--max-num-seqs", type=_list(int), default=(256,))
    space.add_argument("--engines", type=_list(str), default=("vllm",),
                       help="vllm, sglang or both (SGLang: prefill batches alone)")  # fmt: skip
    space.add_argument("--spec-k", type=_list(int), default=(0,),
                       help="speculative drafts a step to try, e.g. 0,2,4 (0: off)")  # fmt: skip
    space.add_argument("--spec-acceptance", type=number_between(0.0, 1.0, "a rate"),
                       default=0.7, help="acceptance per draft of your traffic")  # fmt: skip
    space.add_argument("--spec-method", default="eagle", choices=("ngram", "eagle", "mtp"),
                       help="the drafts' measured overheads (n-gram: free)")  # fmt: skip
    space.add_argument("--prefill-instances", type=_list(int), default=(1,),
                       help="disaggregated: prefill instances a decode one, e.g. 1,2")  # fmt: skip
    space.add_argument("--disaggregated", type=_list(_on_off), default=(False,),
                       help="off, on or off,on: prefill and decode apart")  # fmt: skip
    p.add_argument("--objective", default="cost_per_hour",
                   choices=("cost_per_hour", "cost_per_million_tokens", "gpus"))  # fmt: skip
    p.add_argument("--prices", metavar="FILE", help="GPU-hour prices (default: bundled)")
    p.add_argument("--calibration", default="bundled",
                   help="the step model: 'bundled' (fitted on real vLLM runs), 'none' or "
                        "a file")  # fmt: skip
    p.add_argument("--workers", type=int, help="processes (default: one per core)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the simulations on a Ray cluster (HOST:PORT, or auto)")  # fmt: skip
    p.add_argument("--cache", default=str(DEFAULT_CACHE),
                   help="folder of cached simulations ('none': no cache)")  # fmt: skip
    p.add_argument("--top", type=int, default=5, help="configurations to print")
    p.add_argument("--report", metavar="FILE.md", help="also write the one-page plan (Markdown)")
    p.add_argument("--json", action="store_true", help="one JSON object in SI units")
    p.set_defaults(func=run)


def _inputs(args):
    from itlkit.cli._runs import load_calibration
    from itlkit.plan.prices import read_prices
    from itlkit.plan.space import Slo, Space

    space = Space(gpus=args.gpus, tps=args.tp, replicas=args.replicas,
                  weight_precisions=args.weights_precision, kv_precisions=args.kv_precision,
                  max_num_batched_tokens=args.max_num_batched_tokens,
                  max_num_seqs=args.max_num_seqs, disaggregated=args.disaggregated,
                  engines=args.engines, spec_ks=args.spec_k,
                  prefill_instances=args.prefill_instances)  # fmt: skip
    traffic = _traffic(args)
    return (
        space,
        traffic,
        Slo(args.itl_p99, args.ttft_p99, args.tpot_p99, args.e2e_p99),
        read_prices(args.prices),
        load_calibration(args.calibration),
    )


def _traffic(args):
    """The one traffic given: Poisson at --rate or --rate-profile, a replayed --workload or
    --run, or an incident's (--incident scrapes, --prometheus range)."""
    from itlkit.plan.space import Traffic

    given = [args.rate, args.rate_profile, args.workload, args.incident, args.prometheus,
             args.run]  # fmt: skip
    if sum(g is not None for g in given) != 1:
        raise ValueError("give the traffic as --rate R (Poisson), --rate-profile, --workload "
                         "FILE, --run RUNS.json:ID, --incident SCRAPES or --prometheus URL, one "
                         "of them")  # fmt: skip
    spec = dict(spec_acceptance=args.spec_acceptance, spec_method=args.spec_method)
    if args.incident is not None or args.prometheus is not None:
        return _incident_traffic(args, spec)
    if args.rate_profile is not None:
        peak = max(args.rate_profile.rates_per_second)
        return Traffic(peak, args.prompt_tokens, args.output_tokens, args.duration, args.seed,
                       profile=args.rate_profile, **spec)  # fmt: skip
    if args.workload is None and args.run is None:
        return Traffic(args.rate, args.prompt_tokens, args.output_tokens, args.duration,
                       args.seed, **spec)  # fmt: skip
    from itlkit.sim.workload import read_workload

    replay = (_run_workload(args.run, args.seed) if args.run is not None
              else read_workload(args.workload, seed=args.seed))  # fmt: skip
    rate = replay.num_requests / max(replay.last_arrival_seconds, 1.0)
    return Traffic(rate, None, None, max(replay.last_arrival_seconds, 1.0), args.seed,
                   replay=replay, replay_name=str(args.run or args.workload), **spec)  # fmt: skip


# The prefix cache a run's repeated prompts are served from, in 16-token blocks: the run's own
# KV cache is not the candidate's, so its hits are taken as the run saw them with room to spare
RUN_PREFIX_CACHE_BLOCKS = 1 << 20


def _run_workload(text: str, seed: int):
    """The requests of run ID of an itlkit-runs/1 file (`RUNS.json:ID`)."""
    from itlkit.sim.run_workload import run_workload
    from itlkit.sim.runs import read_runs

    path, sep, run_id = text.partition(".json:")  # run ids hold colons too ("trainval:17")
    path += ".json"
    if not sep or not run_id:
        raise ValueError(f"--run {shown(text)}: give RUNS.json:ID")
    runs = {run.id: run for run in read_runs(path)}
    if run_id not in runs:
        raise ValueError(f"{path}: no run {run_id!r}; its runs: {', '.join(sorted(runs))[:300]}")
    if runs[run_id].workload.max_concurrency is not None:
        raise ValueError(f"run {run_id!r} is a closed loop (max_concurrency): its arrivals "
                         "depend on the server, not the same on another")  # fmt: skip
    return run_workload(runs[run_id], capacity_blocks=RUN_PREFIX_CACHE_BLOCKS, seed=seed)


def _incident_timeline(args):
    """The incident's timeline: a folder of scrapes, or a Prometheus server over a period."""
    from itlkit.diagnosis.evidence import (
        DEFAULT_WINDOW_SECONDS,
        period_seconds,
        timeline_from_frame,
        timeline_from_prometheus,
    )
    from itlkit.metrics.readers import read_paths

    if args.incident is not None:
        if args.start or args.end:
            raise ValueError("--start and --end go with --prometheus, not --incident")
        return timeline_from_frame(read_paths([args.incident]))
    if args.start is None or args.end is None:
        raise ValueError("--prometheus needs --start and --end (RFC 3339 or unix seconds)")
    start, end = period_seconds(args.start, args.end, DEFAULT_WINDOW_SECONDS,
                                names=("--start", "--end", "the window"))  # fmt: skip
    return timeline_from_prometheus(args.prometheus, start=start, end=end)


def _incident_traffic(args, spec: dict):
    """The traffic of an incident (scrapes or Prometheus), as the what-if replays it."""
    from itlkit.diagnosis.whatif import incident_traffic
    from itlkit.plan.space import Traffic

    timeline = _incident_timeline(args)
    seen = incident_traffic(timeline, context_tokens=1024.0)
    peak = max(seen.profile.rates_per_second)
    return Traffic(peak, seen.prompt_tokens, seen.output_tokens, seen.duration_seconds,
                   args.seed, profile=seen.profile,
                   shared_prefix_tokens=seen.shared_prefix_tokens, **spec)  # fmt: skip


def _cache_path(args) -> Path | None:
    if args.cache == "none":
        return None
    folder = Path(args.cache)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "simulations.jsonl"


def run(args) -> int:
    """Sweep, print the best configurations (or JSON); exit 0, or 1 when none meets the SLO."""
    from itlkit.plan.evaluate import p99_uncertainty
    from itlkit.plan.frontier import nothing_meets, ranked
    from itlkit.plan.sweep import run_sweep

    space, traffic, slo, prices, calibration = _inputs(args)
    with _progress(len(space.candidates()), slo, quiet=args.json) as tick:
        sweep = run_sweep(space, model=args.model, traffic=traffic, slo=slo, prices=prices,
                          calibration=calibration, calibration_name=calibration.name,
                          workers=args.workers, cache=_cache_path(args),
                          ray_address=args.ray, progress=tick)  # fmt: skip
    best = ranked(sweep.results, slo, args.objective)
    if args.report:
        from itlkit.plan.report import plan_markdown

        Path(args.report).write_text(plan_markdown(
            sweep.results, model=args.model, traffic=traffic, slo=slo, objective=args.objective,
            prices_note=f"{prices.origin} ({prices.date})", top=args.top))  # fmt: skip
    if args.json:
        doc = _json(sweep, best, slo, args, prices)
        doc["p99_uncertainty"] = p99_uncertainty(calibration)
        print(json.dumps(_clean(doc), indent=2))
    else:
        _print(sweep, best, slo, args, prices)
        print(_uncertainty_text(best, slo, p99_uncertainty(calibration)))
    if not best:
        print(f"itlkit plan: {nothing_meets(sweep.results, slo)}", file=sys.stderr)
        return 1
    return 0


def _progress(total: int, slo, *, quiet: bool):
    """A tqdm bar on stderr: candidates done, pruned, simulated and the cheapest that meets
    the SLO so far; a no-op when quiet or not a terminal."""
    from contextlib import contextmanager

    from tqdm import tqdm

    @contextmanager
    def bar():
        with tqdm(total=total, unit="candidate", file=sys.stderr, leave=False,
                  disable=quiet or not sys.stderr.isatty()) as t:  # fmt: skip
            counts = {"pruned": 0, "simulated": 0, "best": "none yet"}
            best = [math.inf]

            def tick(result):
                counts["pruned" if result.pruned else "simulated"] += 1
                if result.meets(slo) and result.cost_per_hour < best[0]:
                    best[0] = result.cost_per_hour
                    counts["best"] = f"${result.cost_per_hour:,.2f}/h"
                t.set_postfix(counts, refresh=False)
                t.update()

            yield tick

    return bar()


def _row(r, slo) -> dict:
    o = r.outcome
    return {"candidate": r.candidate.as_dict(), "label": r.candidate.label(),
            "cost_per_hour": r.cost_per_hour, "gpus": r.candidate.gpus,
            "pruned": r.pruned, "meets": r.meets(slo),
            "itl_p99_seconds": o.itl_p99_seconds if o else None,
            "ttft_p99_seconds": o.ttft_p99_seconds if o else None,
            "tpot_p99_seconds": o.tpot_p99_seconds if o else None,
            "e2e_p99_seconds": o.e2e_p99_seconds if o else None,
            "output_tokens_per_second": o.output_tokens_per_second if o else None,
            "problem": o.problem if o else None, "margins": r.margins(slo)}  # fmt: skip


def _json(sweep, best, slo, args, prices) -> dict:
    from itlkit.plan.frontier import pareto

    return {
        "objective": args.objective, "slo": {"itl_p99_seconds": slo.itl_p99_seconds,
                                             "ttft_p99_seconds": slo.ttft_p99_seconds,
                                             "tpot_p99_seconds": slo.tpot_p99_seconds,
                                             "e2e_p99_seconds": slo.e2e_p99_seconds},
        "prices": {"date": prices.date, "origin": prices.origin},
        "candidates": len(sweep.results), "pruned": sweep.pruned, "simulated": sweep.simulated,
        "cached": sweep.cached, "best": [_row(r, slo) for r in best[: args.top]],
        "frontier_itl": [_row(r, slo) for r in pareto(sweep.results, "itl_p99")],
        "frontier_ttft": [_row(r, slo) for r in pareto(sweep.results, "ttft_p99")],
        "results": [_row(r, slo) for r in sweep.results],
    }  # fmt: skip


def _print(sweep, best, slo, args, prices) -> None:
    from itlkit.plan.frontier import knob_effects, objective_value

    print(f"{len(sweep.results)} candidates: {sweep.pruned} pruned by the roofline, "
          f"{sweep.simulated} simulated, {sweep.cached} from the cache; prices "
          f"{prices.origin} ({prices.date})")  # fmt: skip
    for i, r in enumerate(best[: args.top], 1):
        o = r.outcome
        print(f"{i}. {r.candidate.label()}: ${r.cost_per_hour:,.2f}/h "
              f"({args.objective} {objective_value(r, args.objective):,.3g}); ITL p99 "
              f"{format_seconds(o.itl_p99_seconds)}, TTFT p99 "
              f"{format_seconds(o.ttft_p99_seconds)}; headroom "
              + ", ".join(f"{k.replace('_', ' ').upper()} {m:.0%}"
                          for k, m in r.margins(slo).items()))  # fmt: skip
    if best:
        print("what the best one's knobs buy (each moved alone):")
        for e in knob_effects(best[0], sweep.results):
            print(f"  {e.knob} {e.value}: " + _effect_text(e.result, slo))


def _uncertainty_text(best, slo, uncertainty: dict) -> str:
    """How far the predicted p99s may be off, and which of the best lack that headroom."""
    if not uncertainty:
        return ("uncertainty: not stated (the uncalibrated roofline has no measured error; "
                "--calibration bundled states one)")  # fmt: skip
    spread = ", ".join(f"{k.replace('_', ' ').upper()} +-{v:.0%}" for k, v in uncertainty.items())
    risky = [i + 1 for i, r in enumerate(best[:5])
             if any(r.margins(slo).get(k, 1.0) < v for k, v in uncertainty.items())]  # fmt: skip
    line = f"uncertainty (the calibration's leave-one-out median error on real runs): {spread}"
    if risky:
        line += f"; less headroom than that: {', '.join(map(str, risky))}"
    return line


def _effect_text(r, slo) -> str:
    if r.pruned:
        return f"pruned ({r.pruned})"
    o = r.outcome
    verdict = "meets the SLO" if r.meets(slo) else "misses it"
    return (f"${r.cost_per_hour:,.2f}/h, ITL p99 {format_seconds(o.itl_p99_seconds)}, TTFT p99 "
            f"{format_seconds(o.ttft_p99_seconds)}: {verdict}")  # fmt: skip


def _clean(value):
    """The JSON document with every non-finite number as null (JSON has no infinity)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
