"""The engine flags of `itlkit simulate`: which engine (vLLM or SGLang), its release, its knobs,
and the settings they come to (`sim.versions` for vLLM, `sim.sglang` for SGLang)."""

from __future__ import annotations

import argparse

from itlkit.cli._args import count_at_most, fraction, number_between, sequences, tokens
from itlkit.errors import ConfigError
from itlkit.sim.versions import KNOWN_RANGE, parse_vllm_version

kv_bandwidth = number_between(1e6, 1e13, "a bandwidth in bytes/s")  # 1 MB/s to 10 TB/s
conservativeness = number_between(1e-3, 1e3, "a factor")  # SGLang's ratio caps at 1 from 1.43
passes = count_at_most(10**6, "a number of scheduler passes")
# max_model_len when --vllm-version is given without --max-model-len: vLLM takes the model's
# context, which the catalog does not hold; 32,768 is the longest at which V0 keeps chunked
# prefill off (V1's defaults do not depend on it below 100,000 tokens or so). SGLang's request
# pool follows the context length too (`sim.sglang.SglangSettings.with_kv_tokens`).
ASSUMED_MAX_MODEL_LEN = 32_768
ENGINES = ("vllm", "sglang")

# Flags of one engine only: (flag, attribute, the engine that has it, the other's name for it).
_VLLM_ONLY = (
    ("--vllm-version", "vllm_version", None),
    ("--max-num-batched-tokens", "max_num_batched_tokens", "--chunked-prefill-size"),
    ("--max-num-seqs", "max_num_seqs", "--max-running-requests"),
    ("--chunked-prefill / --no-chunked-prefill", "chunked_prefill", None),
    ("--gpu-memory-utilization", "gpu_memory_utilization", "--mem-fraction-static"),
    ("--disaggregated", "disaggregated", None),
    ("--async-scheduling / --no-async-scheduling", "async_scheduling", None),
)
_SGLANG_ONLY = (
    ("--chunked-prefill-size", "chunked_prefill_size", "--max-num-batched-tokens"),
    ("--max-prefill-tokens", "max_prefill_tokens", None),
    ("--max-running-requests", "max_running_requests", "--max-num-seqs"),
    ("--enable-mixed-chunk", "enable_mixed_chunk", None),
    ("--mem-fraction-static", "mem_fraction_static", "--gpu-memory-utilization"),
    ("--schedule-conservativeness", "schedule_conservativeness", None),
    ("--scheduler-recv-interval", "scheduler_recv_interval", None),
    ("--num-continuous-decode-steps", "num_continuous_decode_steps", None),
)


def add_engine_arguments(p) -> None:
    """The engine's settings, and the vLLM release whose defaults fill those not given."""
    eng = p.add_argument_group(
        "engine",
        "settings not given take the defaults of --vllm-version on --gpu (printed as 'assumed:' "
        "lines); without it, itlkit's: those of V1 `vllm serve` on a GPU of 70 GiB or more",
    )
    eng.add_argument("--engine", choices=ENGINES, default="vllm",
                     help="the serving engine whose schedule runs (default vllm); sglang: "
                          "prefill batches run alone unless --enable-mixed-chunk")  # fmt: skip
    eng.add_argument("--vllm-version", type=_vllm_version, metavar="VERSION",
                     help="the server's vLLM release (0.10.1.1, v0.6.3, 0.15) or V0 / V1; "
                          f"itlkit knows {KNOWN_RANGE}")  # fmt: skip
    eng.add_argument("--max-model-len", type=tokens, metavar="TOKENS",
                     help="the server's context length, which V0's and SGLang's defaults follow "
                          f"(default with --vllm-version or --engine sglang: "
                          f"{ASSUMED_MAX_MODEL_LEN:,})")  # fmt: skip
    eng.add_argument("--max-num-batched-tokens", type=tokens,
                     help="token budget per step, decode + prefill tokens (default: the "
                          "version's, else 8192)")  # fmt: skip
    eng.add_argument(
        "--max-num-seqs",
        type=sequences,
        help="default: the version's, else min(1024, max_num_batched_tokens)",
    )
    eng.add_argument("--chunked-prefill", dest="chunked_prefill", action="store_const",
                     const=True, help="chunk prompts across steps (default: the version's, "
                                      "else on)")  # fmt: skip
    eng.add_argument("--no-chunked-prefill", dest="chunked_prefill", action="store_const",
                     const=False,
                     help="prefill prompts whole (vLLM then needs --max-num-batched-tokens of at "
                          "least every request's prompt + output)")  # fmt: skip
    eng.add_argument("--async-scheduling", dest="async_scheduling", action="store_const",
                     const=True, help="schedule each step while the one before it runs: a "
                     "request arriving during a step joins the step after next (default: the "
                     "version's, on from vLLM 0.14; else off)")  # fmt: skip
    eng.add_argument("--no-async-scheduling", dest="async_scheduling", action="store_const",
                     const=False,
                     help="a request arriving during a step joins the next one")  # fmt: skip
    eng.add_argument("--disaggregated", action="store_true", default=None,
                     help="prefill on another instance; decode steps carry no chunks")  # fmt: skip
    eng.add_argument("--kv-transfer-bandwidth", type=kv_bandwidth, default=50e9,
                     metavar="BYTES_PER_SECOND", help="prefill-to-decode KV link")  # fmt: skip
    _add_sglang_arguments(p)


def _add_sglang_arguments(p) -> None:
    """SGLang's own flags (`--engine sglang`)."""
    sg = p.add_argument_group(
        "SGLang (with --engine sglang; SGLang's own flag names and, where not given, its "
        "defaults on --gpu)"
    )
    sg.add_argument("--chunked-prefill-size", type=tokens, metavar="TOKENS",
                    help="the most prompt tokens one prefill batch carries (default by GPU "
                         "memory: 8,192 on an H100)")  # fmt: skip
    sg.add_argument(
        "--max-prefill-tokens",
        type=tokens,
        metavar="TOKENS",
        help="the most new tokens of a prefill batch (default 16,384)",
    )
    sg.add_argument(
        "--max-running-requests",
        type=sequences,
        metavar="N",
        help="default: from the KV pool, 2,048 to 4,096 requests",
    )
    sg.add_argument(
        "--enable-mixed-chunk",
        action="store_true",
        default=None,
        help="the running decodes ride in each prefill batch",
    )
    sg.add_argument(
        "--mem-fraction-static",
        type=fraction,
        metavar="SHARE",
        help="GPU memory for weights + KV (default by GPU memory: ~0.83 on an H100)",
    )
    sg.add_argument(
        "--schedule-conservativeness",
        type=conservativeness,
        metavar="FACTOR",
        help="scales the KV a prompt's admission holds back for the running requests' output "
        "(default 1: 0.7 of it at first, falling to 0.098 over 600 decode steps)",
    )
    sg.add_argument(
        "--scheduler-recv-interval",
        type=passes,
        metavar="N",
        help="the scheduler takes new requests every N decode passes and after each prefill "
        "(default 1: before every pass)",
    )
    sg.add_argument(
        "--num-continuous-decode-steps",
        type=passes,
        metavar="N",
        help="accepted as SGLang does, and like SGLang since 2024 without effect: one decode "
        "pass per scheduler pass (default 1)",
    )


def check_engine_flags(args) -> None:
    """Refuse a flag of the engine not chosen, naming the chosen engine's flag where it has one."""
    other = _SGLANG_ONLY if args.engine == "vllm" else _VLLM_ONLY
    for flag, attribute, counterpart in other:
        if getattr(args, attribute, None) is not None:
            owner = "SGLang" if args.engine == "vllm" else "vLLM"
            instead = f"; --engine {args.engine} calls it {counterpart}" if counterpart else ""
            need = " (give --engine sglang)" if owner == "SGLang" else ""
            article = "an" if owner == "SGLang" else "a"
            raise ConfigError(f"{flag} is {article} {owner} setting{need}{instead}")


def _vllm_version(text: str):
    try:
        return parse_vllm_version(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def engine_settings(args):
    """The engine settings given, and the defaults of --vllm-version (or itlkit's) or SGLang's
    for the rest, on --gpu as CUDA reports it; ConfigError, naming the flag, where that engine
    would not start."""
    from itlkit.physics.engine_memory import cuda_total_bytes
    from itlkit.physics.hardware import get_gpu
    from itlkit.sim.versions import engine_defaults

    gpu = get_gpu(args.gpu)
    total = cuda_total_bytes(gpu)[0]
    if args.engine == "sglang":
        return _sglang_settings(args, gpu, total)
    given = {
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "enable_chunked_prefill": args.chunked_prefill,
        "gpu_memory_utilization": args.gpu_memory_utilization,
    }
    try:
        return engine_defaults(args.vllm_version, gpu_memory_bytes=total, gpu_name=gpu.name,
                               max_model_len=max_model_len(args), given=given,
                               async_scheduling=args.async_scheduling)  # fmt: skip
    except ConfigError as exc:
        raise ConfigError(f"--vllm-version {args.vllm_version.text}: {exc}") from None


def _sglang_settings(args, gpu, total_bytes: float):
    from itlkit.sim.sglang import SETTINGS, sglang_settings

    given = {key: getattr(args, key) for key in SETTINGS}
    return sglang_settings(gpu_memory_bytes=total_bytes, gpu_name=gpu.name, gpus=args.tp,
                           given=given)  # fmt: skip


def max_model_len(args) -> int:
    return args.max_model_len or ASSUMED_MAX_MODEL_LEN
