"""SGLang's scheduling policy and its start-up defaults, read from SGLang's own source.

What SGLang's scheduler does each step (sgl-project/sglang, Apache-2.0; the files and commits
below; docs/research/sglang-scheduling.md quotes the lines):

- **Prefill first.** `Scheduler.get_next_batch_to_run` forms a prefill batch from the prompt
  part-way through its chunks (at most one, `chunked_req`, first) and the waiting queue in
  arrival order ("fcfs", the default `schedule_policy`), and runs it if it formed one ("Run
  prefill first if possible"); only then does the running batch decode. A prefill batch holds
  at most min(`max_prefill_tokens`, `chunked_prefill_size`) new tokens, and running plus new
  requests at most `max_running_requests`. The decodes wait out every prefill batch
  (managers/scheduler.py @ 0003215cf1464f44b389cd0b18d0b4c56f2a3da6; managers/schedule_policy.py
  `PrefillAdder` @ ad0119fdde519598c25f5c48b95dacaa2b85d607).
- **Mixed chunks** (`--enable-mixed-chunk`, off by default): every running request rides in
  the prefill batch with one decode token (`ForwardMode.MIXED`, `mix_with_running` in
  managers/schedule_batch.py @ fd3907ee4618e96b73ee94d9a836db78efb5d046), and both token budgets
  shrink by one per running request: vLLM's mixed step with the chunk size as the budget.
- **One token per request per decode step**; a prefill batch emits the first token of each
  request whose prompt it completes, an intermediate chunk none.
- **KV reservation at admission.** `PrefillAdder` admits a prompt only if its uncached tokens
  plus min(its output left, 4,096) stay below the free KV less, for every running request,
  min(its output left, 4,096) x `new_token_ratio`; each admitted prompt then holds back
  min(its max output, 4,096) for the rest of the batch. A refusal ("NO_TOKEN") marks the running
  batch full: no waiting prompt is tried again until a running request leaves
  (managers/schedule_policy.py `PrefillAdder` @ ad0119fdde519598c25f5c48b95dacaa2b85d607;
  managers/scheduler.py `_get_new_batch_prefill_raw` @ 1a882c5c63cfeff4e20254078cbd89500d5b1fe9).
- **The ratio** starts at 0.7 x `--schedule-conservativeness` (at most 1), falls by
  (init - 0.14 x init) / 600 each decode step to 0.14 x init, is set after a retraction from the
  requests left (`NewTokenRatio.after_retraction`) and returns to its start when the server is
  idle (`NewTokenRatioTracker`, managers/scheduler_components/new_token_ratio_tracker.py and
  managers/scheduler.py `update_running_batch`, `on_idle` @ 1a882c5c; the constants in
  environ.py @ 0003215cf1464f44b389cd0b18d0b4c56f2a3da6).
- **Retraction.** When a decode step would not have one free KV token per running request,
  `retract_decode` retracts the request with the fewest generated tokens (ties: the longest
  prompt, then the newest) until it fits; each frees its KV and goes to the waiting queue's
  tail keeping its tokens, to be prefilled again over prompt + output (managers/schedule_batch.py
  @ fd3907ee4618e96b73ee94d9a836db78efb5d046; the prompt being chunked is not in the running
  batch and is never retracted).

- **Receiving every N-th pass** (`--scheduler-recv-interval N`, default 1). At the top of each
  turn of its event loop (one turn per forward batch, the normal and the overlap loop alike)
  the scheduler adds a weight for the batch the last turn ran to a counter: 1 for a decode
  batch, 1 for a turn that ran none, 1,000 for any other (a prefill or mixed batch); only when
  the counter reaches N does it take the requests the tokenizer sent and reset it to 0
  (`SchedulerRecvSkipper.handle`, managers/scheduler_components/recv_skipper.py @
  9fea3e9bb28676a93f5ba3587c79453dc5027e4b; the weights `SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*`
  in environ.py @ 0003215cf1464f44b389cd0b18d0b4c56f2a3da6; the call in `recv_requests`,
  managers/scheduler_components/request_receiver.py @ 64469892457133da2efddfda1c1a27ecf1f4479b,
  and the loops `event_loop_normal`, `event_loop_overlap` in managers/scheduler.py @ 0003215c).
  So while it only decodes, a request sent during a pass waits for the N-th decode pass; after
  a prefill batch the next pass receives; an idle scheduler's turns run no batch and take no
  GPU time, so it reaches N and receives at once.
- **`--num-continuous-decode-steps`** is declared (default 1, arg_groups/fields/schedule.py @
  001b88623b1def14a6970a26626d17c7ee874e91) and read by nothing: the scheduler's loops at
  0003215c and 1a882c5c63cfeff4e20254078cbd89500d5b1fe9 run one batch per turn, and receive
  before each. The loop that ran decode batches back to back (v0.3's `run_step` @
  d51c1c21d1ac07cd5d1de9ead6c99087d8428e79; a flag since sgl-project/sglang#1652) was removed
  by #2095 (Nov 2024), as #37551, which would delete the flag, says; #23131 (Apr 2026), which
  would have wired it again, was closed unmerged. itlkit reads the setting and runs one decode
  step per pass whatever its value.

itlkit's engine runs the first policy as prefill-only steps (`SchedulerConfig.
prefill_only_steps`, chunked at the budget) and the second as its mixed step; the reservation
and the retraction order come with `SglangSchedulerConfig.new_token_ratio` (`Engine.
retract_decode`, `Engine.reservation_refuses`). With mixed chunks itlkit retracts before it
admits, where SGLang decides on a prefill batch first, and the ratio decays in every step
without prompt tokens. The receive interval comes with `SglangSchedulerConfig.recv_skipper`
(`RecvSkipper`; `Engine.receive_turn`): an arrival joins the queue at the first step of a
receiving pass that starts at or after it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from itlkit.errors import ConfigError
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.versions import shown_setting

MIB = 2**20
GIB = 2**30

ENGINE_NAME = "SGLang"

# Settings an sglang_settings caller may give, by SGLang's names (`--chunked-prefill-size` ...).
SETTINGS = (
    "chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "enable_mixed_chunk",
    "mem_fraction_static", "schedule_conservativeness", "scheduler_recv_interval",
    "num_continuous_decode_steps",
)  # fmt: skip

# `handle_gpu_memory_settings`, python/sglang/srt/arg_groups/memory_hook.py @
# 031ed82d8b5ec8db9cf88cffb057c2e91c964262: the smallest visible GPU's total memory as
# nvidia-smi reports it (MiB), against N * 1024 (GiB, strictly below), picks the chunk size and
# the decode CUDA graphs' largest batch (for TP below 4). Older 0.5 releases took 2,048 below
# 35 GiB.
CHUNK_TIERS: tuple[tuple[float, int, int], ...] = (
    # (below this many bytes, chunked_prefill_size, cuda_graph_max_bs)
    (20 * GIB, 2048, 8),
    (35 * GIB, 4096, 48),  # "A10, 4090, 5090"
    (60 * GIB, 4096, 32),  # A100 40GB, L40S
    (90 * GIB, 8192, 256),  # H100, A100 80GB
    (160 * GIB, 8192, 256),  # H200
    (float("inf"), 16384, 512),  # B200, MI300X
)
MAX_PREFILL_TOKENS = 16384  # `max_prefill_tokens` default, arg_groups/fields/schedule.py @ 001b8862

# `mem_fraction_static` when not given (memory_hook.py @ 031ed82d): (total - reserved) / total,
# reserved = 512 MiB + 1.5 MiB per chunk token (at least 2,048) + 2 MiB per CUDA-graph batch
# + 128 MiB per GPU of TP x PP, and at least 10 GiB on GPUs above 60 GiB.
RESERVED_BASE_BYTES = 512 * MIB
RESERVED_PER_CHUNK_TOKEN_BYTES = 1.5 * MIB
RESERVED_PER_GRAPH_BATCH_BYTES = 2 * MIB
RESERVED_PER_GPU_BYTES = 1024 / 8 * MIB
RESERVED_FLOOR_BYTES = 10 * GIB
RESERVED_FLOOR_ABOVE_BYTES = 60 * GIB

# `max_running_requests` when not given: min(KV tokens // 2, the request pool), the pool
# min(max(KV tokens / context length x 512, 2048), 4096) (managers/tp_worker.py @ 0045f98e,
# model_executor/model_runner_kv_cache_mixin.py `init_memory` @ 001ccef0).
POOL_PER_CONTEXT = 512
POOL_MIN, POOL_MAX = 2048, 4096

# The new-token ratio: environ.py @ 0003215cf1464f44b389cd0b18d0b4c56f2a3da6 ("Scheduler token
# budgeting and admission"), read by `NewTokenRatioTracker.from_server_args`
# (new_token_ratio_tracker.py @ 1a882c5c), `PrefillAdder` and `retract_decode`.
INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO, x --schedule-conservativeness
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the floor, x the start
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: start to floor
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: tokens a kept request counts after one
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: output reserved, at most
# --schedule-conservativeness default, arg_groups/fields/schedule.py @ 001b8862
SCHEDULE_CONSERVATIVENESS = 1.0
# --scheduler-recv-interval and --num-continuous-decode-steps defaults (schedule.py @ 001b8862)
SCHEDULER_RECV_INTERVAL = 1
NUM_CONTINUOUS_DECODE_STEPS = 1
# What a loop turn adds to the receive counter, by the batch the turn before ran: environ.py @
# 0003215c ("Scheduler polling"), read by `SchedulerRecvSkipper` (recv_skipper.py @ 9fea3e9b).
# (A turn that ran no batch adds 1, `_NONE`: an idle scheduler's turns, which take no GPU
# time, reach any interval at once.)
RECV_WEIGHT_DECODE = 1  # SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE
RECV_WEIGHT_OTHER = 1000  # SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT: prefill, mixed


@dataclass(frozen=True)
class NewTokenRatio:
    """SGLang's guess of the share of its output left that a running request will still
    decode, for which admission holds KV back (`NewTokenRatioTracker`, new_token_ratio_tracker.py
    @ 1a882c5c63cfeff4e20254078cbd89500d5b1fe9): it starts at `init`, falls by `decay` a decode
    step to `floor`, is set by a retraction (`after_retraction`) and returns to `init` when
    idle. The engine keeps the current ratio; these are the rules."""

    init: float
    floor: float
    decay: float  # per decode step
    clip_tokens: int = CLIP_MAX_NEW_TOKENS
    retract_tokens: int = RETRACT_DECODE_STEPS

    @classmethod
    def from_conservativeness(cls, conservativeness: float) -> NewTokenRatio:
        """`from_server_args`: init = min(0.7 x conservativeness, 1), floor = min(0.14 x init, 1),
        decay = (init - floor) / 600."""
        init = min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        floor = min(init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        return cls(init, floor, (init - floor) / NEW_TOKEN_RATIO_DECAY_STEPS)

    def decayed(self, ratio: float, *, steps: int = 1) -> float:
        """The ratio after `steps` decode steps that retract nothing: max(ratio - decay, floor)
        each (`decay_step`, one subtraction a step, so a stretch of steps lands where the steps
        one by one would)."""
        for _ in range(steps):
            ratio = max(ratio - self.decay, self.floor)
            if ratio == self.floor:
                break
        return ratio

    def after_retraction(self, *, generated_tokens: int, max_new_tokens: int,
                         requests: int) -> float:  # fmt: skip
        """`retract_decode`'s new ratio over the requests left running: (their generated
        tokens + 20 each) / (their max new tokens + 1), at most 1 (managers/schedule_batch.py @
        fd3907ee4618e96b73ee94d9a836db78efb5d046)."""
        return min(1.0, (generated_tokens + self.retract_tokens * requests) / (max_new_tokens + 1))

    def held_back(self, output_left_tokens: int, ratio: float) -> float:
        """KV tokens admission holds back for a running request with this much output left
        (`PrefillAdder._get_running_request_total_token_offset`)."""
        return min(output_left_tokens, self.clip_tokens) * ratio


@dataclass(frozen=True)
class RecvSkipper:
    """When SGLang's scheduler takes new requests with `--scheduler-recv-interval` above 1
    (`SchedulerRecvSkipper`, recv_skipper.py @ 9fea3e9bb28676a93f5ba3587c79453dc5027e4b): each
    loop turn adds the weight of the batch the turn before ran to a counter, and the turn that
    brings it to `interval` receives and sets it to 0. The engine keeps the counter (always
    below `interval` after a turn); these are the rules."""

    interval: int

    def tick(self, count: int, *, prefill: bool) -> int:
        """The counter after a turn whose last batch carried prompt tokens (`prefill`: an
        extend or mixed batch) or only decodes; 0 exactly when the turn receives."""
        count += RECV_WEIGHT_OTHER if prefill else RECV_WEIGHT_DECODE
        return 0 if count >= self.interval else count

    def turns_to_receive(self, count: int) -> int:
        """Decode turns from this counter to the next that receives (1 to `interval`)."""
        return -(-(self.interval - count) // RECV_WEIGHT_DECODE)

    def after_decode_turns(self, count: int, turns: int) -> int:
        """The counter after `turns` more turns that follow decode batches."""
        return (count + turns * RECV_WEIGHT_DECODE) % self.interval


@dataclass(frozen=True)
class SglangSchedulerConfig(SchedulerConfig):
    """The engine's knobs with SGLang's KV reservation and retraction order (`NewTokenRatio`;
    None: vLLM's, admitting while the chunk fits and preempting the newest to the queue's head)
    and its KV pool in pages of one token (`--page-size` 1, the default); with
    `recv_skipper`, arrivals join the queue only at receiving passes (None: at every step)."""

    new_token_ratio: NewTokenRatio | None = None
    kv_page_tokens: int = 1
    recv_skipper: RecvSkipper | None = None


@dataclass(frozen=True)
class SglangSettings:
    """The settings an SGLang server runs with: those given, its defaults for the rest;
    `assumptions` says, one line each, what was taken and why."""

    chunked_prefill_size: int
    max_prefill_tokens: int
    max_running_requests: int | None  # None: from the KV pool (`with_kv_tokens`)
    enable_mixed_chunk: bool
    mem_fraction_static: float
    assumptions: tuple[str, ...]
    schedule_conservativeness: float = SCHEDULE_CONSERVATIVENESS
    scheduler_recv_interval: int = SCHEDULER_RECV_INTERVAL
    num_continuous_decode_steps: int = NUM_CONTINUOUS_DECODE_STEPS  # read by no SGLang since 2024
    version = None  # no SGLang release is modelled apart: the current source's defaults
    engine = ENGINE_NAME
    enable_chunked_prefill = True  # off only with --chunked-prefill-size -1: not modelled
    enable_prefix_caching = True  # the radix cache, unless --disable-radix-cache
    follows_context_length = True  # its request pool does (`with_kv_tokens`)

    @property
    def max_num_batched_tokens(self) -> int:
        """The new tokens one step may carry (vLLM's name for the budget)."""
        return min(self.chunked_prefill_size, self.max_prefill_tokens)

    @property
    def gpu_memory_utilization(self) -> float:
        """The share of GPU memory SGLang's static pools (weights + KV) may take."""
        return self.mem_fraction_static

    def describe(self) -> str:
        """The settings in SGLang's names, for a report's header."""
        mixed = "mixed chunks" if self.enable_mixed_chunk else "prefill batches alone"
        seqs = (
            "from the KV pool"
            if self.max_running_requests is None
            else (f"{self.max_running_requests:,}")
        )
        return (
            f"SGLang: chunked_prefill_size {self.chunked_prefill_size:,}, max_prefill_tokens "
            f"{self.max_prefill_tokens:,}, max_running_requests {seqs}, {mixed}, "
            f"schedule_conservativeness {self.schedule_conservativeness:g}"
            + (f", scheduler_recv_interval {self.scheduler_recv_interval}"
               if self.scheduler_recv_interval > 1 else "")
        )  # fmt: skip

    def with_kv_tokens(self, kv_tokens: int, *, context_tokens: int) -> SglangSettings:
        """The running-request cap SGLang derives from its KV pool of `kv_tokens` tokens when
        none is given; `context_tokens`: the model's context length."""
        if self.max_running_requests is not None:
            return self
        pool = min(max(int(kv_tokens / context_tokens * POOL_PER_CONTEXT), POOL_MIN), POOL_MAX)
        cap = max(min(kv_tokens // 2, pool), 1)
        said = (f"max_running_requests {cap:,}: SGLang's default, min(KV tokens // 2, its "
                f"request pool {pool:,}) for {kv_tokens:,} KV tokens at context length "
                f"{context_tokens:,}")  # fmt: skip
        return replace(self, max_running_requests=cap, assumptions=(*self.assumptions, said))

    def scheduler_config(self, **rest) -> SglangSchedulerConfig:
        """itlkit's engine knobs for this policy: prefill-only steps chunked at the budget, or
        mixed steps whose budget the decodes share (`--enable-mixed-chunk`); admission that
        reserves KV and retraction fewest-generated first (`NewTokenRatio`); arrivals taken
        every `scheduler_recv_interval` passes (`RecvSkipper`)."""
        seqs = self.max_running_requests
        if seqs is None:
            raise ConfigError("max_running_requests is not set: call with_kv_tokens first")
        budget = self.max_num_batched_tokens
        if self.enable_mixed_chunk and seqs > budget:
            seqs = budget  # a mixed step carries a decode token for every running request
        ratio = NewTokenRatio.from_conservativeness(self.schedule_conservativeness)
        interval = self.scheduler_recv_interval
        skipper = RecvSkipper(interval) if interval > 1 else None  # 1: SGLang makes none
        return SglangSchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=seqs,
                                     enable_chunked_prefill=True,
                                     prefill_only_steps=not self.enable_mixed_chunk,
                                     new_token_ratio=ratio, recv_skipper=skipper,
                                     **rest)  # fmt: skip


def chunk_tier(gpu_memory_bytes: float) -> tuple[int, int]:
    """SGLang's default chunk size and decode CUDA-graph batch for a GPU of this total memory."""
    return next((chunk, graphs) for below, chunk, graphs in CHUNK_TIERS
                if gpu_memory_bytes < below)  # fmt: skip


def default_mem_fraction(gpu_memory_bytes: float, *, chunk_tokens: int, graph_batch: int,
                         gpus: int = 1) -> float:  # fmt: skip
    """SGLang's `mem_fraction_static` default (memory_hook.py @ 031ed82d), rounded as it does."""
    reserved = (
        RESERVED_BASE_BYTES
        + max(chunk_tokens, 2048) * RESERVED_PER_CHUNK_TOKEN_BYTES
        + graph_batch * RESERVED_PER_GRAPH_BATCH_BYTES
        + gpus * RESERVED_PER_GPU_BYTES
    )
    if gpu_memory_bytes > RESERVED_FLOOR_ABOVE_BYTES:
        reserved = max(reserved, RESERVED_FLOOR_BYTES)
    return round((gpu_memory_bytes - reserved) / gpu_memory_bytes, 3)


def sglang_settings(
    *,
    gpu_memory_bytes: float,
    gpu_name: str = "",
    gpus: int = 1,
    given: Mapping[str, object] | None = None,
) -> SglangSettings:
    """The settings `python -m sglang.launch_server` runs with on this GPU (`gpu_memory_bytes`:
    its total memory) where `given` (SGLang names, `SETTINGS`) does not set them."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ValueError(f"sglang_settings: unknown settings {unknown}; known: {SETTINGS}")
    gpu = f"{gpu_name or 'the GPU'} ({gpu_memory_bytes / GIB:.1f} GiB in all)"
    said = [f"{ENGINE_NAME}: prefill-first scheduling, its defaults read in its source "
            "(python/sglang/srt/arg_groups, managers: cited in itlkit/sim/sglang.py)"]  # fmt: skip
    chunk, graphs = chunk_tier(gpu_memory_bytes)
    value = dict(given)

    def take(key: str, default, why: str) -> None:
        if key not in given:
            value[key] = default
            said.append(f"{key} {shown_setting(default)}: {why}")

    take("chunked_prefill_size", chunk, f"SGLang's default for {gpu}")
    take("max_prefill_tokens", MAX_PREFILL_TOKENS, "SGLang's default")
    take("enable_mixed_chunk", False, "SGLang's default: a prefill batch runs alone and the "
         "running requests' decodes wait")  # fmt: skip
    fraction = default_mem_fraction(gpu_memory_bytes, chunk_tokens=value["chunked_prefill_size"],
                                    graph_batch=graphs, gpus=gpus)  # fmt: skip
    take("mem_fraction_static", fraction, f"SGLang's default for {gpu} and {gpus} GPU(s)")
    take("schedule_conservativeness", SCHEDULE_CONSERVATIVENESS, "SGLang's default: a prompt is "
         "admitted only if it and its output fit beside min(output left, 4,096) x a ratio of "
         "every running request's output, the ratio falling from 0.7 to 0.098 over 600 decode "
         "steps")  # fmt: skip
    take("scheduler_recv_interval", SCHEDULER_RECV_INTERVAL, "SGLang's default: the scheduler "
         "takes new requests before every forward pass")  # fmt: skip
    take("num_continuous_decode_steps", NUM_CONTINUOUS_DECODE_STEPS, "SGLang's default, and "
         "what it does whatever the value: one decode pass per scheduler pass")  # fmt: skip
    for key in ("chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                "scheduler_recv_interval", "num_continuous_decode_steps"):  # fmt: skip
        v = value.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{key} must be an integer >= 1, got {v!r}")
    share = value["mem_fraction_static"]
    if not 0 < share <= 1:
        raise ConfigError(f"mem_fraction_static must be in (0, 1], got {share}")
    careful = value["schedule_conservativeness"]
    number = isinstance(careful, int | float) and not isinstance(careful, bool)
    if not (number and careful > 0 and math.isfinite(careful)):
        raise ConfigError(f"schedule_conservativeness must be a number > 0, got {careful!r}")
    steps = value["num_continuous_decode_steps"]
    if steps > 1 and "num_continuous_decode_steps" in given:
        said.append(f"num_continuous_decode_steps {steps}: run as 1, one decode pass per "
                    "scheduler pass: no SGLang reads the setting since sgl-project/sglang#2095 "
                    "(Nov 2024)")  # fmt: skip
    return SglangSettings(value["chunked_prefill_size"], value["max_prefill_tokens"],
                          value.get("max_running_requests"), bool(value["enable_mixed_chunk"]),
                          share, tuple(said), float(careful),
                          scheduler_recv_interval=value["scheduler_recv_interval"],
                          num_continuous_decode_steps=steps)  # fmt: skip
