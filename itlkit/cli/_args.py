"""argparse value types shared by the subcommands (a module without `add_parser`: no command)."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """An integer > 0, or a clear argparse error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0, or a clear argparse error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def above_one(text: str) -> float:
    """A finite factor > 1 (a slow mode is slower than the floor), or a clear argparse error."""
    value = positive_float(text)
    if not value > 1:
        raise argparse.ArgumentTypeError(f"must be a factor above 1, got {text}")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1], such as an efficiency or a memory share, or a clear argparse error."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1], got {text}")
    return value


def seconds_at_most(limit_seconds: float):
    """An argparse type: a duration in [0, limit] seconds (a host cost, a latency)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
        if not 0 <= value <= limit_seconds:
            raise argparse.ArgumentTypeError(
                f"must be between 0 and {limit_seconds:g} seconds, got {text}"
            )
        return value

    return parse


DEFAULT_DEPLOYMENT = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights_precision": "bf16"}


def add_deployment_arguments(parser, *, memory: bool = False, inferred: bool = False) -> None:
    """--model --gpu --weights-precision --kv-precision --tp --mfu (with `memory`, also
    --gpu-memory-utilization): what `deployment_from_args` reads. With `inferred`, the first
    three default to None, for the command to take them from its input or state its assumption.
    """
    d = {k: None if inferred else v for k, v in DEFAULT_DEPLOYMENT.items()}
    parser.add_argument("--model", default=d["model"], help="catalog name or path to config.json")
    parser.add_argument("--gpu", default=d["gpu"], help="catalog GPU name")
    parser.add_argument("--weights-precision", default=d["weights_precision"],
                        help="bf16, fp16, fp8, int8, int4")  # fmt: skip
    parser.add_argument("--kv-precision", default="bf16", help="bf16, fp16, fp8")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    parser.add_argument("--mfu", type=fraction, default=0.5, help="matmul efficiency (0, 1]")
    if memory:
        parser.add_argument(
            "--gpu-memory-utilization",
            type=fraction,
            default=0.9,
            help="vLLM's HBM fraction for weights + KV (sets KV capacity)",
        )


def deployment_from_args(args, **settings):
    """The `Deployment` the arguments of `add_deployment_arguments` describe, with `settings`."""
    from itlkit.physics.roofline import Deployment

    if hasattr(args, "gpu_memory_utilization"):
        settings.setdefault("gpu_memory_utilization", args.gpu_memory_utilization)
    return Deployment.create(
        model=args.model,
        gpu=args.gpu,
        weight_precision=args.weights_precision,
        kv_precision=args.kv_precision,
        tp=args.tp,
        mfu=args.mfu,
        **settings,
    )
