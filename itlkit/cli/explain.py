"""`itlkit explain`: the step decomposition as a worked answer, or one JSON object (SI units)."""

from __future__ import annotations

import json
import sys

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_assumptions,
    deployment_from_args,
    seconds_at_most,
    sequences,
    step_seconds,
    tokens,
)
from itlkit.cli._spec_args import (
    add_speculation_arguments,
    speculation_assumptions,
    speculation_from_args,
)
from itlkit.errors import ConfigError


def add_parser(subparsers) -> None:
    """Register `itlkit explain`."""
    p = subparsers.add_parser(
        "explain",
        help="decompose one engine step (floor, chunked-prefill step, prefill cost, MBU)",
        description="Decompose one engine step into weight reads, KV reads and prefill work.",
    )
    add_deployment_arguments(p, memory=True, link=True)
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
    add_speculation_arguments(p)
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
        speculation=speculation_from_args(args),
    )
    _check_measured_step(result.values)
    if args.json:
        print(json.dumps(result.values, indent=2))
    else:
        _print_lines(result)
        for line in [*deployment_assumptions(args, dep), *speculation_assumptions(args)]:
            print(f"assumed: {line}")
    if not result.values["fits_in_memory"]:
        print(
            "itlkit explain: this configuration does not fit in GPU memory: "
            + next(line.value for line in result.lines if line.quantity == "memory"),
            file=sys.stderr,
        )
        return 1
    return 0


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
