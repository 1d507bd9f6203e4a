"""argparse value types shared by the subcommands (a module without `add_parser`: no command)."""

from __future__ import annotations

import argparse
import math

from itlkit.diagnosis.deployment import DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_PRECISION

# Bounds beyond any real deployment, which keep the arithmetic on a value finite (a batch of
# 1e300 sequences overflows a float; a 400-digit integer cannot become one). A flag with a
# tighter physical range says so with its own bounds.
MOST_COUNT = 10**9  # sequences, tokens, requests
LEAST_NUMBER, MOST_NUMBER = 1e-9, 1e15  # seconds, rates, bytes per second
LEAST_FRACTION = 1e-3  # an efficiency or share below 0.1 % is a typo, not a server


def shown(text: str) -> str:
    """A user's value as an error repeats it: quoted, one line, at most 40 characters."""
    text = str(text)
    return repr(text if len(text) <= 40 else text[:37] + "...")


def whole_number(least: int, most: int, what: str = "a whole number"):
    """An argparse type: an integer in [least, most], or a clear argparse error."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip()) if len(text) <= 30 else None
        except ValueError:
            value = None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not {what} from {least:,} to {most:,}"
            )
        return value

    return parse


def count_at_most(most: int = MOST_COUNT, what: str = "a whole number"):
    """An argparse type: an integer in [1, most] (a count of things there is at least one of)."""
    return whole_number(1, most, what)


def number_between(least: float, most: float, what: str = "a number"):
    """An argparse type: a finite number in [least, most], or a clear argparse error."""

    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if not least <= value <= most:  # NaN, inf and denormals fail here
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not {what} from {least:g} to {most:g}"
            )
        return value

    return parse


positive_int = count_at_most()
seed = whole_number(0, 2**32 - 1, "a seed")  # numpy's seeds are unsigned 32-bit words
positive_float = number_between(LEAST_NUMBER, MOST_NUMBER, "a positive number")
fraction = number_between(LEAST_FRACTION, 1.0, "a fraction")
above_one = number_between(1.000001, 1e6, "a factor above 1")


# What the deployment and step flags hold: a batch of sequences, a number of tokens, a step.
sequences = count_at_most(10**7, "a number of sequences")
tokens = count_at_most(10**8, "a number of tokens")  # no model reads 100M tokens
mean_sequences = number_between(1.0, 1e7, "a mean number of sequences")
mean_tokens = number_between(1.0, 1e8, "a mean number of tokens")
step_seconds = number_between(1e-6, 3600.0, "a step time in seconds")
window_seconds = number_between(1.0, 365 * 86400.0, "a window in seconds")


def seconds_at_most(limit_seconds: float):
    """An argparse type: a duration in [0, limit] seconds (a host cost, a latency)."""
    return number_between(0.0, limit_seconds, "a number of seconds")


class ModelName(str):
    """--model's value: a catalog name or a config.json path, as `get_model` takes it; `said`
    holds how a served name (a Hugging Face id) was read, for the command's 'assumed:' lines."""

    said: str = ""
    precision: str | None = None  # the weight precision the served name states


def model_name(text: str) -> ModelName:
    """An argparse type for --model: a catalog name or a config.json path, else a served name
    (`meta-llama/Llama-3.1-8B-Instruct`, `Qwen/Qwen3-235B-A22B-FP8`) that `guess_model` reads
    as a catalog architecture; else a clear argparse error that lists the catalog."""
    from itlkit.errors import UnknownNameError
    from itlkit.physics.model_catalog import MODELS, names_a_config
    from itlkit.physics.model_names import guess_model

    key = text.strip()
    if key.lower() in MODELS or names_a_config(key):
        return ModelName(key)
    guess = guess_model(key)
    if guess is None:
        raise argparse.ArgumentTypeError(
            str(UnknownNameError(f"unknown model {shown(key)}; valid models: {', '.join(MODELS)}"))
        )
    value = ModelName(guess.slug)
    value.said = f"--model {key!r} {guess.reading}"
    value.precision = guess.weight_precision
    return value


def model_assumptions(args) -> list[str]:
    """The 'assumed:' lines of a --model given as a served name: how it was read, and a weight
    precision its name states that --weights-precision does not price."""
    model = getattr(args, "model", None)
    if not isinstance(model, ModelName) or not model.said:
        return []
    lines = [model.said]
    given = getattr(args, "weights_precision", None)
    if model.precision and given and model.precision != given:
        lines.append(f"its name says {model.precision} weights, but --weights-precision is "
                     f"{given}: priced as {given} (pass --weights-precision {model.precision} "
                     "to price the checkpoint's)")  # fmt: skip
    return lines


def deployment_assumptions(args, deployment) -> list[str]:
    """The 'assumed:' lines of the deployment flags: how --model was read, and the link a TP
    beyond one node's is priced over in `deployment` (`roofline.tp_link_assumption`)."""
    from itlkit.physics.roofline import tp_link_assumption

    link = tp_link_assumption(deployment)
    return [*model_assumptions(args), *([link] if link else [])]


DEFAULT_DEPLOYMENT = {
    "model": DEFAULT_MODEL,
    "gpu": DEFAULT_GPU,
    "weights_precision": DEFAULT_PRECISION,
}


def add_deployment_arguments(parser, *, memory: bool = False, inferred: bool = False,
                             link: bool = False) -> None:  # fmt: skip
    """--model --gpu --weights-precision --kv-precision --tp --mfu (with `memory`, also
    --gpu-memory-utilization; with `link`, --interconnect): what `deployment_from_args` reads.
    With `inferred`, the first three default to None, for the command to take them from its
    input or state its assumption.
    """
    d = {k: None if inferred else v for k, v in DEFAULT_DEPLOYMENT.items()}
    parser.add_argument("--model", type=model_name, default=d["model"],
                        help="catalog name, path to config.json, or a served name such as "
                             "meta-llama/Llama-3.1-8B-Instruct (read as its catalog "
                             "architecture, and said so)")  # fmt: skip
    parser.add_argument("--gpu", default=d["gpu"], help="catalog GPU name")
    parser.add_argument("--weights-precision", default=d["weights_precision"],
                        help="bf16, fp16, fp8, int8, int4 (weight-only, 16-bit matmuls), "
                             "fp4 (MXFP4/NVFP4 with FP4 activations)")  # fmt: skip
    parser.add_argument("--kv-precision", default=None if inferred else "bf16",
                        help="bf16, fp16, fp8")  # fmt: skip
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    parser.add_argument("--mfu", type=fraction, default=0.5, help="matmul efficiency (0, 1]")
    if link:
        parser.add_argument("--interconnect", choices=("nvlink", "pcie", "network"),
                            help="the link TP's all-reduces cross (default: the GPU's own, "
                                 "NVLink where it has it): pcie for GPUs in pods or cards "
                                 "without a bridge, network for TP across nodes")  # fmt: skip
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
    if getattr(args, "interconnect", None) is not None:
        settings.setdefault("interconnect", args.interconnect)
    return Deployment.create(
        model=args.model,
        gpu=args.gpu,
        weight_precision=args.weights_precision,
        kv_precision=args.kv_precision,
        tp=args.tp,
        mfu=args.mfu,
        **settings,
    )
