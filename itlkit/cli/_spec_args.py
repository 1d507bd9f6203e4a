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
    kw = dict(method=args.spec_method, draft_params=args.spec_draft_params)
    if args.spec_mean_length is not None:
        return speculation_from_mean_length(args.spec_k, args.spec_mean_length, **kw)
    try:
        rates = tuple(float(x) for x in args.spec_acceptance.split(","))
    except ValueError:
        raise ConfigError(f"--spec-acceptance {args.spec_acceptance!r}: give numbers from 0 to "
                          "1, one or one per position, separated by commas") from None  # fmt: skip
    return Speculation(args.spec_k, rates[0] if len(rates) == 1 else rates, **kw)


def speculation_text(spec) -> str:
    """One line: what the speculative deployment is and what a step emits."""
    rates = ", ".join(f"{p:.2f}" for p in spec.per_position)
    return (
        f"speculative decoding: {spec.method}, k {spec.k} drafts a step, acceptance per "
        f"position {rates}: {spec.tokens_per_step:.2f} tokens a step on average"
    )
