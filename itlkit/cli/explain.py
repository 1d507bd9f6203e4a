"""`itlkit explain`: the step decomposition as a worked answer, or one JSON object (SI units)."""

from __future__ import annotations

import json
import sys

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_from_args,
    seconds_at_most,
    sequences,
    step_seconds,
    tokens,
)
from itlkit.errors import ConfigError


def add_parser(subparsers) -> None:
    """Register `itlkit explain`."""
    p = subparsers.add_parser(
        "explain",
        help="decompose one engine step (floor, chunked-prefill step, prefill cost, MBU)",
        description="Decompose one engine step into weight reads, KV reads and prefill work.",
    )
    add_deployment_arguments(p, memory=True)
    p.add_argument("--batch", type=sequences, default=64, help="running sequences")
    p.add_argument("--context", type=tokens, default=4096, help="tokens per sequence")
    chunked = p.add_mutually_exclusive_group()
    chunked.add_argument("--chunk", type=tokens, help="prefill chunk tokens riding in the step")
    chunked.add_argument("--max-num-batched-tokens", type=tokens, metavar="TOKENS",
                         help="vLLM's token budget; the chunk is what decodes leave")  # fmt: skip
    p.add_argument("--prompt", type=tokens, help="prompt tokens to prefill (TTFT price)")
    p.add_argument("--measured-step", type=step_seconds, metavar="SECONDS")
    p.add_argument("--host-overhead", type=seconds_at_most(10.0), default=0.0, metavar="SECONDS")
    p.add_argument("--allreduce-latency", type=seconds_at_most(1.0), default=0.0,
                   metavar="SECONDS")  # fmt: skip
    p.add_argument("--prefill-attention", action="store_true", help="count attention FLOPs")
    p.add_argument(
        "--exclude-input-embedding", action="store_true", help="don't count the embedding read"
    )
    p.add_argument("--calibration", metavar="FILE",
                   help="also show the step a calibrated server takes: CALIBRATION.json from "
                        "`itlkit calibrate`, or 'bundled' (fitted on real vLLM runs)")  # fmt: skip
    spec = p.add_argument_group("speculative decoding (the verification step of k drafts)")
    spec.add_argument("--spec-k", type=sequences, metavar="K", help="draft tokens per step")
    spec.add_argument(
        "--spec-acceptance",
        metavar="RATE[,RATE...]",
        help="one rate a (position i accepted with a^i) or one per position",
    )
    spec.add_argument(
        "--spec-mean-length",
        type=float,
        metavar="TOKENS",
        help="mean tokens per step instead (SGLang's accept length)",
    )
    spec.add_argument("--spec-method", default="ngram", help="ngram, eagle, mtp or draft")
    spec.add_argument(
        "--spec-draft-params",
        type=float,
        default=0.0,
        metavar="PARAMS",
        help="parameters one draft pass streams (an EAGLE head ~ one layer)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object in SI units")
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the worked answer; exit 0 (or 2 through the dispatcher on bad input)."""
    from itlkit.physics.explain import explain

    dep = deployment_from_args(
        args,
        host_overhead_seconds=args.host_overhead,
        allreduce_latency_seconds=args.allreduce_latency,
        prefill_attention=args.prefill_attention,
        exclude_input_embedding=args.exclude_input_embedding,
    )
    result = explain(
        dep,
        batch_size=args.batch,
        context_tokens=args.context,
        chunk_tokens=args.chunk,
        prompt_tokens=args.prompt,
        measured_step_seconds=args.measured_step,
        calibration=_calibration(args.calibration),
        max_num_batched_tokens=args.max_num_batched_tokens,
        speculation=_speculation(args),
    )
    _check_measured_step(result.values)
    if args.json:
        print(json.dumps(result.values, indent=2))
    else:
        _print_lines(result)
    if not result.values["fits_in_memory"]:
        print(
            "itlkit explain: this configuration does not fit in GPU memory: "
            + next(line.value for line in result.lines if line.quantity == "memory"),
            file=sys.stderr,
        )
        return 1
    return 0


def _speculation(args):
    """The --spec-* flags as a Speculation (None without --spec-k); ConfigError names the flag."""
    from itlkit.physics.speculative import Speculation, speculation_from_mean_length

    given = [f for f in ("spec_acceptance", "spec_mean_length") if getattr(args, f) is not None]
    if args.spec_k is None:
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} needs --spec-k (drafts per step)")
        return None
    if len(given) != 1:
        raise ConfigError("--spec-k needs one of --spec-acceptance or --spec-mean-length")
    kw = dict(method=args.spec_method, draft_params=args.spec_draft_params)
    if args.spec_mean_length is not None:
        return speculation_from_mean_length(args.spec_k, args.spec_mean_length, **kw)
    try:
        rates = tuple(float(x) for x in args.spec_acceptance.split(","))
    except ValueError:
        raise ConfigError(f"--spec-acceptance {args.spec_acceptance!r}: give numbers from 0 to "
                          "1, one or one per position, separated by commas") from None  # fmt: skip
    return Speculation(args.spec_k, rates[0] if len(rates) == 1 else rates, **kw)


def _calibration(choice: str | None):
    if choice in (None, "none"):
        return None
    from itlkit.cli._runs import load_calibration

    return load_calibration(choice)


def _check_measured_step(values: dict) -> None:
    """A step faster than the bandwidth floor means the input is wrong, not a 1000% MBU."""
    if values.get("mbu", 0.0) > 1.0:
        from itlkit.units import format_seconds

        raise ConfigError(
            f"--measured-step {values['measured_step_seconds']:g} s is faster than the "
            f"bandwidth floor {format_seconds(values['floor_seconds'])} (MBU over 100%): check "
            "the step time's unit (seconds), the model, precision, GPU, batch and context"
        )


def _print_lines(result) -> None:
    width = max(len(line.quantity) for line in result.lines)
    for line in result.lines:
        print(f"{line.quantity:<{width}}  {line.formula}")
        print(f"{'':<{width}}  = {line.value}")
