"""The --spec-* flags that `explain` and `simulate` share: a speculative deployment."""

from __future__ import annotations

from itlkit.cli._args import sequences
from itlkit.errors import ConfigError


def add_speculation_arguments(p) -> None:
    """Register the --spec-* flags in their own group of parser `p`."""
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
        help="mean tokens per step instead (SGLang's accept length, vLLM's mean acceptance "
        "length: 1 + accepted / drafts)",
    )
    spec.add_argument("--spec-method", default="ngram", help="ngram, eagle, mtp or draft")
    spec.add_argument(
        "--spec-draft-params",
        type=float,
        default=0.0,
        metavar="PARAMS",
        help="parameters one draft pass streams (an EAGLE head ~ one layer)",
    )
    spec.add_argument("--spec-draft-pass-seconds", type=float, metavar="SECONDS",
                      help="measured time of one draft pass beyond its weight read (default: "
                           "the method's published fit, where itlkit has one)")  # fmt: skip
    spec.add_argument(
        "--spec-verify-extra-seconds",
        type=float,
        metavar="SECONDS",
        help="measured time each verification step adds (default: as above)",
    )


def speculation_from_args(args):
    """The --spec-* flags as a Speculation (None without --spec-k); ConfigError names the flag."""
    from itlkit.physics.speculative import Speculation, speculation_from_mean_length

    given = [f for f in ("spec_acceptance", "spec_mean_length") if getattr(args, f) is not None]
    if args.spec_k is None:
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} needs --spec-k (drafts per step)")
        return None
    if len(given) != 1:
        raise ConfigError("--spec-k needs one of --spec-acceptance or --spec-mean-length")
    kw = dict(method=args.spec_method, draft_params=args.spec_draft_params,
              **_overheads(args))  # fmt: skip
    if args.spec_mean_length is not None:
        return speculation_from_mean_length(args.spec_k, args.spec_mean_length, **kw)
    try:
        rates = tuple(float(x) for x in args.spec_acceptance.split(","))
    except ValueError:
        raise ConfigError(f"--spec-acceptance {args.spec_acceptance!r}: give numbers from 0 to "
                          "1, one or one per position, separated by commas") from None  # fmt: skip
    return Speculation(args.spec_k, rates[0] if len(rates) == 1 else rates, **kw)


def _overheads(args) -> dict:
    """The measured overheads given, else the method's published fit (none for n-gram or a
    draft model, whose cost the roofline prices from its parameters)."""
    from itlkit.physics.speculative import measured_overheads

    given = dict(verify_extra_seconds=args.spec_verify_extra_seconds,
                 draft_pass_seconds=args.spec_draft_pass_seconds)  # fmt: skip
    measured = measured_overheads(args.spec_method)
    return {key: measured[key] if value is None else value for key, value in given.items()}


def speculation_assumptions(args) -> list[str]:
    """The 'assumed:' lines of the --spec-* defaults taken."""
    from itlkit.physics.speculative import MEASURED_OVERHEADS

    if args.spec_k is None or args.spec_method not in MEASURED_OVERHEADS:
        return []
    if args.spec_verify_extra_seconds is not None and args.spec_draft_pass_seconds is not None:
        return []
    extra, per_pass, where = MEASURED_OVERHEADS[args.spec_method]
    return [f"{args.spec_method} overheads {extra * 1e3:.2f} ms a verification step + "
            f"{per_pass * 1e3:.2f} ms a draft pass, fitted on {where}; other models and GPUs "
            "differ: --spec-verify-extra-seconds, --spec-draft-pass-seconds"]  # fmt: skip


def speculation_text(spec) -> str:
    """One line: what the speculative deployment is and what a step emits."""
    rates = ", ".join(f"{p:.2f}" for p in spec.per_position)
    return (
        f"speculative decoding: {spec.method}, k {spec.k} drafts a step, acceptance per "
        f"position {rates}: {spec.tokens_per_step:.2f} tokens a step on average"
    )
