"""The engine behind `itlkit.sim.scheduler.simulate`: one object, one method per part of a step.

`Engine.step()` reads as the scheduler's docstring: enqueue what arrived, then either run a
stretch of pure decode steps at once, or preempt the newest while KV is short, continue partial
prompts, admit waiting requests, run the step, retire finished requests and emit first tokens.
With SGLang's policy (`sim.sglang.NewTokenRatio`) admission also holds KV back for the running
requests' output, and a decode short of KV retracts fewest-generated first (`retract_decode`);
with its `--scheduler-recv-interval` (`sim.sglang.RecvSkipper`) arrivals join the queue only at
a receiving pass (`receive_turn`).
Per-request state lives in `_Request` slots objects; per-step records in a `StepLog`
(`itlkit.sim.step_log`); decode step times come through `DecodeTimes` (`itlkit.sim.decode_times`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.engine_memory import BLOCK_TOKENS
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.decode_times import DecodeTimes
from itlkit.sim.step_log import StepLog

# Stretches of pure decode steps skip the scheduler: a tight loop, or numpy arrays when long
# (or when their step times are tabulated, see `DecodeTimes`).
FAST_PATH_MIN_STEPS = 2
FAST_PATH_ARRAY_STEPS = 32  # shorter untabulated stretches: a loop (numpy costs ~15 us a call)
FAST_PATH_MAX_STEPS = 4096
FAST_PATH_BOUND_STEPS = 64  # longer stretches first bound their length by the limit


def _not_positive(seconds: float) -> ConfigError:
    """The one error for a step function's time that is not > 0 (raised where it is checked,
    inline: the checks sit on the engine's hottest lines)."""
    return ConfigError(f"step function returned {seconds} s for a step; it must be > 0")


@dataclass(slots=True, eq=False)
class _Request:
    """One request's scheduling state (token counts; times in seconds)."""

    index: int
    prompt: int
    output: int
    cached: int  # prompt tokens in the prefix cache
    computed: int  # KV tokens held
    target: int  # tokens to prefill before the next token is emitted
    remote_kv: bool  # disaggregated: its KV arrives from the prefill instance
    shared: int  # of the cached tokens, those its prefix group holds once
    group: int  # prefix group (-1: none)
    generated: int = 0  # tokens emitted so far (valid while not decoding)
    decoding: bool = False
    seg_step: int = 0  # step of the current segment's first token
    seg_kv: int = 0  # KV tokens at the end of that step
    seg_gen: int = 0  # tokens emitted after that step
    epoch: int = 0  # bumps on preemption; invalidates scheduled finishes
    preemptions: int = 0
    freed: int = 0  # preempted: tokens beyond its cached prefix, freed into the block pool
    freed_mark: int = 0  # ... evicted one by one once `Engine.allocated` passes this
    sharing: bool = False  # its shared tokens are counted in its group's (see Engine.groups)
    first_scheduled: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    last_token: float = math.nan


@dataclass(slots=True, eq=False)
class _Batch:
    """What the step being scheduled carries."""

    completions: list  # requests whose prefill completes (a new list each step: cheap to make)
    budget: int = 0
    preempted: int = 0
    prefill: int = 0
    new_tokens: int = 0  # disaggregated admissions: one decode token each, no prefill
    new_kv: int = 0
    held_back: float = -1.0  # SGLang: KV tokens admission holds back (< 0: not counted yet)


@dataclass(slots=True, eq=False)
class Segments:
    """Token runs (request i emitted at every step end from first to last) and resume gaps."""

    request: list = field(default_factory=list)
    first: list = field(default_factory=list)
    last: list = field(default_factory=list)
    gap_request: list = field(default_factory=list)
    gap_end: list = field(default_factory=list)
    gap_value: list = field(default_factory=list)

    def close(self, i: int, first: int, last: int) -> None:
        self.request.append(i)
        self.first.append(first)
        self.last.append(last)

    def gap(self, i: int, end: float, value: float) -> None:
        self.gap_request.append(i)
        self.gap_end.append(end)
        self.gap_value.append(value)

    def close_all(self, requests: list, last: int) -> None:
        """`close` for each request, its run from its `seg_step` to `last` (one batch)."""
        self.request.extend([r.index for r in requests])
        self.first.extend([r.seg_step for r in requests])
        self.last.extend([last] * len(requests))

    def gap_all(self, requests: list, end: float) -> None:
        """`gap` for each request, of its wait since its `last_token` until `end`."""
        self.gap_request.extend([r.index for r in requests])
        self.gap_end.extend([end] * len(requests))
        self.gap_value.extend([end - r.last_token for r in requests])


class Engine:
    """A vLLM V1 engine over one workload: `step()` until it returns False."""

    def __init__(
        self,
        workload,
        *,
        step_function,
        capacity_tokens: int,
        config: SchedulerConfig,
        ready_seconds: np.ndarray,
        ready_order: np.ndarray,
        end_seconds: float,
        jitter: np.ndarray | None = None,
    ):
        self._set_timing(step_function, jitter)
        self.capacity = int(capacity_tokens)
        self.budget_total = int(config.max_num_batched_tokens)
        self.width = 1 + int(getattr(config, "speculative_tokens", 0))  # budget per decode
        self.max_seqs = int(config.max_num_seqs)
        self.chunked = bool(config.enable_chunked_prefill)
        self.prefill_first = bool(getattr(config, "prefill_only_steps", False))
        self.paused: list[_Request] = []  # decoders waiting out prefill-only steps (V0)
        self.resumed: list[_Request] = []  # ... that decode again in the step being run
        self.end_limit = end_seconds
        self._set_requests(workload, bool(config.disaggregated), ready_seconds, ready_order)
        self.waiting: deque[_Request] = deque()
        self.running: list[_Request] = []
        self.partial: list[_Request] = []  # running, part-way through a prefill, oldest first
        self.finishes: dict[int, list[tuple[_Request, int]]] = {}
        self.finish_steps: list[int] = []  # heap of `finishes`' keys (stale ones popped lazily)
        self.used = 0  # KV tokens held by running requests (a group's shared prefix once)
        # New KV tokens handed out so far: a preempted request's freed blocks wait in vLLM's free
        # queue behind the free ones, and each allocation evicts from the queue's head.
        self.allocated = 0
        self.refind = bool(getattr(config, "enable_prefix_caching", True))
        self.page_tokens = int(getattr(config, "kv_page_tokens", BLOCK_TOKENS))  # found in these
        # KV an admission leaves free (V0's watermark: `config.V0_WATERMARK`), in whole blocks
        share = float(getattr(config, "admission_watermark", 0.0))
        self.watermark = int(share * (self.capacity // self.page_tokens)) * self.page_tokens
        # Per prefix group, the shared tokens of each running request counted in it: the group
        # holds the longest of them (the others are its prefixes), as vLLM's block pool keeps one
        # copy of a block however many requests reference it.
        self.groups: dict[int, list[int]] = {}
        self.decoders = 0
        self.decode_kv = 0  # summed context of the decoding requests
        self.t = 0.0
        self.s = 0
        self.log = StepLog(self.ready_array)
        self.segments = Segments()
        self.first_tokens = 0  # requests that got their first token so far
        # vLLM's --async-scheduling: step N+1 is scheduled as step N starts, so a step takes the
        # arrivals up to its previous step's start (`admission_horizon`); None: no step ran
        # since the engine was last empty
        self.async_scheduling = getattr(config, "async_scheduling", False)
        self.last_start: float | None = None
        self._set_sglang(config)

    def _set_timing(self, step_function, jitter) -> None:
        self.step_function = step_function
        # One step's time, positional (decode, prefill, KV tokens as ints): the step function's
        # own fast path where it has one (`roofline_step_function`'s `scheduled_seconds`).
        self.scheduled_seconds = getattr(step_function, "scheduled_seconds", None) or (
            lambda d, p, kv: step_function(decode_tokens=d, prefill_tokens=p, kv_tokens=kv)
        )
        self.decode_times = DecodeTimes(step_function)
        # Step s lasts its formula's time x jitter[s % len(jitter)] (a calibrated spread).
        self.jitter = None if jitter is None else np.asarray(jitter, dtype=float)
        self.jitter_list = None if jitter is None else self.jitter.tolist()
        self.jitter_min = 1.0 if jitter is None else float(self.jitter.min())

    def _set_requests(self, workload, remote: bool, ready_seconds, ready_order) -> None:
        """The request table and when each request reaches the engine."""
        prompt, cached = workload.prompt_tokens.tolist(), workload.cached_prompt_tokens.tolist()
        columns = (prompt, workload.output_tokens.tolist(), cached, cached, prompt,
                   [remote] * len(prompt), workload.shared_prompt_tokens.tolist(),
                   workload.prefix_group.tolist())  # fmt: skip
        self.requests = list(map(_Request, range(len(prompt)), *columns))
        self.ready_array = np.asarray(ready_seconds, dtype=float)
        self.ready_seconds = self.ready_array.tolist()
        self.ready_order = [self.requests[i] for i in np.asarray(ready_order).tolist()]
        self.next_ready = 0
        # A closed-loop client (`Workload.max_concurrency`) sends its first N requests at their
        # arrival and each later one when a request in flight finishes (`send_next`): until
        # then its ready time is unknown (inf). Ready times stay sorted: later arrivals, and
        # finishes in time order.
        self.slots = workload.max_concurrency
        if self.slots is not None:
            self.wanted = self.ready_seconds  # when the client wants to send each request
            self.ready_array = self.ready_array.copy()
            self.ready_array[self.slots :] = math.inf
            self.ready_seconds = self.ready_array.tolist()
            self.unsent = min(self.slots, len(self.ready_seconds))

    def _set_sglang(self, config) -> None:
        # SGLang's KV reservation and retraction order (`sim.sglang.NewTokenRatio`); None: vLLM's
        self.reservation = getattr(config, "new_token_ratio", None)
        self.ratio = self.reservation.init if self.reservation is not None else 0.0
        self.batch_full = False  # SGLang: admission ran out of KV; no prompt until one leaves
        # SGLang's receive counter (`sim.sglang.RecvSkipper`); None: arrivals join at every step
        self.recv = getattr(config, "recv_skipper", None)
        self.recv_count = 0
        self.last_prefill = False  # the last step carried prompt tokens
        self.idle = True  # nothing ran since the engine was last empty: the next pass receives

    # ---- the loop ------------------------------------------------------------------------
    def step(self) -> bool:
        """Advance by one scheduled step or one stretch of decode steps; False when done."""
        i = self.next_ready
        receiving = self.recv is None or self.receive_turn()
        horizon = self.admission_horizon()
        if receiving and i < len(self.ready_seconds) and self.ready_seconds[i] <= horizon:
            self.enqueue_ready(horizon)
        if not self.running and not self.waiting:
            if self.reservation is not None:
                self.ratio = self.reservation.init  # SGLang's `on_idle`
            if self.next_ready >= len(self.ready_seconds):
                return False
            # (an arrival not yet received may be due already: the clock never goes back)
            self.t = max(self.t, self.ready_seconds[self.next_ready])
            self.idle = True
            self.last_start = None
            return True
        if self.t >= self.end_limit:
            return False
        if self.decoders == len(self.running) and self.decode_stretch():
            return True
        batch = _Batch([])
        if not (self.prefill_first and self.prefill_only(batch)):
            self.schedule(batch)
        start = self.t
        duration, counts = self.run(batch)
        end = start + duration
        self.last_prefill = batch.prefill > 0
        if self.resumed:
            self.resumed_gaps(end)
        generation = self.decoders
        self.decode_kv += self.decoders
        if self.s in self.finishes:
            self.retire(end)
        first, prompt, generation = self.emit(batch.completions, end, generation)
        self.first_tokens += first
        self.log.add(start, duration, counts, (self.used, first, prompt, generation))
        self.t = end
        self.last_start = start
        self.s += 1
        return True

    def schedule(self, batch: _Batch) -> None:
        """A step of decodes, partial prompts and admissions (V1; V0 with chunked prefill); with
        prefill-only steps, of decodes alone (the prompts ran in `prefill_only`, or could not)."""
        if self.paused:
            self.resume_paused()
        if self.reservation is not None:
            self.retract_decode(batch)
        self.preempt_newest(batch)
        if self.prefill_first:
            if not (self.decoders or batch.preempted):  # no prompt could run, nor ever will
                raise self._stalled()
            if self.reservation is not None:
                self.decode_ratio(batch)
            return
        if self.partial:
            self.continue_partials(batch)
        if self.waiting and not batch.preempted and not self.batch_full:  # never after a preemption
            self.admit_waiting(batch)
            if not self.running:  # would step forever: a KV accounting bug
                raise self._stalled()
        if self.reservation is not None:
            self.decode_ratio(batch)

    def _stalled(self) -> RuntimeError:
        why = ("; SGLang admits a prompt only while it and its output stay below the free KV: "
               "one whose prompt + output fill the whole pool never starts"
               if self.reservation is not None else "")  # fmt: skip
        return RuntimeError(
            f"engine stalled at step {self.s}: nothing decodes, yet no prompt can be scheduled "
            f"({self.used} of {self.capacity} KV tokens counted held){why}"
        )

    def receive_turn(self) -> bool:
        """Whether SGLang's scheduler pass for this step takes the requests sent so far: its
        counter grows by the weight of the last step (`RecvSkipper.tick`). After idling it
        receives at once with the counter at 0, where SGLang's idle turns (and this engine's
        calls while empty) count their way to the interval in no time."""
        if self.idle:
            self.idle, self.recv_count = False, 0
            return True
        self.recv_count = self.recv.tick(self.recv_count, prefill=self.last_prefill)
        return self.recv_count == 0

    def admission_horizon(self) -> float:
        """The latest arrival the step about to start can take: its start; under vLLM's
        --async-scheduling the start of the step before it, while one ran. The engine core
        schedules step N+1 as soon as step N is launched, before it blocks on N's output
        (`EngineCore.step_with_batch_queue`, batch queue of 2: vllm/v1/engine/core.py @
        vllm-project/vllm 00080ee1), so a request that reaches it while N runs waits for N+2;
        with the engine empty the first step is scheduled at once."""
        if self.async_scheduling and self.last_start is not None:
            return self.last_start
        return self.t

    def enqueue_ready(self, horizon: float) -> None:
        """Requests that arrived (or whose KV arrived) by `horizon` join the queue."""
        ready, n = self.ready_seconds, len(self.ready_seconds)
        while self.next_ready < n and ready[self.next_ready] <= horizon:
            self.waiting.append(self.ready_order[self.next_ready])
            self.next_ready += 1

    # ---- scheduling ----------------------------------------------------------------------
    def preempt_newest(self, batch: _Batch) -> None:
        """Give every decode its token, preempting the newest running request while KV is short."""
        while self.used + self.decoders > self.capacity:
            victim = self.running.pop()
            if not victim.decoding:
                self.partial.remove(victim)
            self._preempt(victim, batch)
        self.used += self.decoders
        self.allocated += self.decoders
        batch.budget = self.budget_total - self.decoders * self.width

    def continue_partials(self, batch: _Batch) -> None:
        """Running requests part-way through their prompt take the next chunk, oldest first."""
        for r in list(self.partial):
            if batch.budget <= 0:
                break
            if batch.preempted and r not in self.partial:  # by an older one's chunk in this step
                continue
            chunk = min(r.target - r.computed, batch.budget)
            if self.reservation is not None:  # SGLang's chunk takes the room left; none preempts
                chunk = min(chunk, self.chunk_room(batch))
                if chunk <= 0:
                    break
            while self.used + chunk > self.capacity:
                victim = self.running.pop()
                if victim.decoding:  # hand back its decode token, reserved above
                    self.used -= 1
                    batch.budget += self.width
                else:
                    self.partial.remove(victim)
                self._preempt(victim, batch)
                if victim is r:
                    break
            if batch.preempted and r not in self.partial:
                continue
            self._prefill(r, chunk, batch)
            if r.computed == r.target:
                self.partial.remove(r)
                if self.reservation is not None:
                    self.hold_back_output(r, batch)

    def admit_waiting(self, batch: _Batch) -> None:
        """Admit waiting requests in order while a sequence slot, budget and their KV are free."""
        waiting, running = self.waiting, self.running
        while waiting and len(running) < self.max_seqs and batch.budget > 0:
            r = waiting[0]
            if r.remote_kv:  # the prompt's KV arrived: one decode token emits the next token
                if self.used + r.prompt + 1 > self.capacity:
                    break
                self._admit(r)
                r.computed = r.prompt + 1
                self.used += r.prompt + 1
                self.allocated += r.prompt + 1
                batch.budget -= 1
                batch.new_tokens += 1
                batch.new_kv += r.prompt
                batch.completions.append(r)
                continue
            if r.freed:
                r.computed = self._refound(r)
            chunk = r.target - r.computed
            if chunk > batch.budget:
                if self.chunked:
                    chunk = batch.budget
                elif batch.prefill > 0:
                    break
            held = r.computed if not r.shared else self._hold_cost(r)  # its cached prefix's KV
            # (an empty engine admits without the watermark: V0 would refuse such a prompt
            # for good, and the simulator would wait for it forever)
            headroom = self.watermark if running else 0
            if self.used + held + chunk + headroom > self.capacity:
                break
            if self.reservation is not None and self.reservation_refuses(r, held, batch):
                break
            self._admit(r)
            self.used += held
            if r.shared:
                self.groups.setdefault(r.group, []).append(r.shared)
                r.sharing = True
            self._prefill(r, chunk, batch)
            if r.computed != r.target:
                self.partial.append(r)
            if self.reservation is not None and self.admitted_fills(r, batch):
                break

    # ---- prefill-only steps: V0 without chunked prefill, SGLang without mixed chunks ------------
    def prefill_only(self, batch: _Batch) -> bool:
        """Prompts first, with the whole token budget; a step that schedules any runs them alone
        and every decode waits. True when this step is such a step.

        vLLM V0 without chunked prefill: waiting prompts whole (vllm/core/scheduler.py
        `_schedule_default`: "Don't schedule decodes if prefills are scheduled", vllm-project/vllm
        @ 0dce2b29aaaa36d3b7e5d80302b1018c1c296eee). SGLang by default: the prompt part-way
        through its chunks first, then waiting ones, at most the chunk size in all; a prefill
        batch, when one can be formed, runs before the running batch decodes (`sim.sglang`)."""
        if not (self.waiting or self.partial):
            return False
        if self.batch_full and not self.partial:  # SGLang: no prefill batch until one leaves
            return False
        batch.budget = self.budget_total
        if self.partial:
            self.continue_alone(batch)
        if self.waiting and batch.budget > 0 and not self.batch_full:
            self.admit_waiting(batch)
        if not batch.prefill:
            return False
        self.pause_decoders()
        return True

    def continue_alone(self, batch: _Batch) -> None:
        """Prompts part-way through take their next chunk in a prefill-only step, oldest first,
        while their KV fits; one that does not fit waits for a decode step to free or preempt.
        (At most one is part-way through: an older one takes the budget first, and a waiting one
        is admitted only into budget left over.)"""
        for r in list(self.partial):
            chunk = min(r.target - r.computed, batch.budget)
            if self.reservation is not None:
                chunk = min(chunk, self.chunk_room(batch))
            if chunk <= 0 or self.used + chunk > self.capacity:
                break
            self._prefill(r, chunk, batch)
            if r.computed == r.target:
                self.partial.remove(r)
                if self.reservation is not None:
                    self.hold_back_output(r, batch)

    def pause_decoders(self) -> None:
        """Every decoder sits out a prefill-only step: its token run ends at the last step, its
        KV stays held, its finish moves (as a preemption, without freeing anything). One pass
        over the batch, the run's hottest loop in V0 and SGLang runs."""
        s, t = self.s, self.t
        paused = [r for r in self.running if r.decoding]
        kv = 0
        for r in paused:
            done = s - 1 - r.seg_step  # it last emitted a token at step s - 1
            r.computed = r.seg_kv + done
            r.generated = r.seg_gen + done
            kv += r.computed
            r.decoding = False
            r.epoch += 1  # its scheduled finish no longer holds
            r.last_token = t  # steps run back to back while it decodes
        self.segments.close_all(paused, s - 1)
        self.decoders -= len(paused)
        self.decode_kv -= kv
        self.paused.extend(paused)

    def resume_paused(self) -> None:
        """The paused decoders decode again in this step: each reads its KV, emits a token at
        its end (an ITL of the whole wait: `resumed_gaps`) and finishes as many steps later as
        it has tokens left."""
        s, finishes, heap = self.s, self.finishes, self.finish_steps
        kv = 0
        for r in self.paused:
            r.decoding = True
            kv += r.computed
            r.seg_step, r.seg_kv, r.seg_gen = s, r.computed + 1, r.generated + 1
            last = s + r.output - r.seg_gen
            entries = finishes.get(last)
            if entries is None:
                finishes[last] = entries = []
                heapq.heappush(heap, last)
            entries.append((r, r.epoch))
        self.decoders += len(self.paused)
        self.decode_kv += kv
        self.resumed, self.paused = self.paused, []

    def resumed_gaps(self, end: float) -> None:
        self.segments.gap_all(self.resumed, end)
        self.resumed = []

    # ---- SGLang's KV reservation and retraction (`sim.sglang.NewTokenRatio`) ----------------
    def retract_decode(self, batch: _Batch) -> None:
        """A decode step short of one KV token per running request retracts, fewest generated
        tokens first (ties: the longest prompt, then the newest), until it fits, and sets the
        ratio from the requests left (`ScheduleBatch.retract_decode`, sglang
        managers/schedule_batch.py @ fd3907ee4618e96b73ee94d9a836db78efb5d046). The prompt being
        chunked is not in SGLang's running batch: never retracted. Where SGLang would keep the
        last request and assert it fits, itlkit retracts it too."""
        if self.used + self.decoders <= self.capacity:
            return
        kept = sorted((r for r in self.running if r.decoding),
                      key=lambda r: (self._generated(r), -r.prompt), reverse=True)  # fmt: skip
        while self.used + self.decoders > self.capacity:
            victim = kept.pop()
            self.running.remove(victim)
            self._preempt(victim, batch)
        self.ratio = self.reservation.after_retraction(
            generated_tokens=sum(self._generated(r) for r in kept),
            max_new_tokens=sum(r.output for r in kept),
            requests=len(kept),
        )

    def decode_ratio(self, batch: _Batch) -> None:
        """A step without prompt tokens that retracted nothing decays the ratio one step
        (`Scheduler.update_running_batch`, managers/scheduler.py @ 1a882c5c)."""
        if not (batch.preempted or batch.prefill):
            self.ratio = self.reservation.decayed(self.ratio)

    def room(self, batch: _Batch) -> float:
        """KV tokens the prefill being formed may still take: the free ones less what is held
        back for the running requests' output and the admitted prompts' (`PrefillAdder.
        rem_total_tokens`, schedule_policy.py @ ad0119fdde519598c25f5c48b95dacaa2b85d607). The
        running requests' share is counted at the first question of the step, before anything
        in it is admitted or completes its prompt."""
        if batch.held_back < 0:
            policy, ratio, partial = self.reservation, self.ratio, self.partial
            batch.held_back = sum(policy.held_back(r.output - self._generated(r), ratio)
                                  for r in self.running if r not in partial)  # fmt: skip
        return self.capacity - self.used - batch.held_back

    def chunk_room(self, batch: _Batch) -> int:
        """The most a prompt part-way through may take (`PrefillAdder.add_chunked_req`)."""
        return int(self.room(batch))

    def reservation_refuses(self, r: _Request, held: int, batch: _Batch) -> bool:
        """SGLang's `PrefillAdder.add_one_req`: a prompt whose uncached tokens, min(its output
        left, 4,096) and the cached prefix it locks reach the room left is refused, and the
        running batch counts as full (no prompt is tried until a request leaves)."""
        output = min(max(r.output - r.generated, 0), self.reservation.clip_tokens)
        if r.target - r.computed + output + held >= self.room(batch):
            self.batch_full = True
            return True
        return False

    def admitted_fills(self, r: _Request, batch: _Batch) -> bool:
        """After admitting r (`PrefillAdder._update_prefill_budget`, `budget_state`): its output
        is held back if its prompt completes; True, and the batch counts as full, when no room
        is left."""
        if r.computed == r.target:
            self.hold_back_output(r, batch)
        if self.room(batch) <= 0 or self.used >= self.capacity:
            self.batch_full = True
        return self.batch_full

    def hold_back_output(self, r: _Request, batch: _Batch) -> None:
        """A prompt that completes in the batch holds back min(its max output, 4,096)
        (`PrefillAdder._update_prefill_budget`)."""
        batch.held_back += min(r.output, self.reservation.clip_tokens)

    def _generated(self, r: _Request) -> int:
        """Tokens r has emitted before the step being scheduled."""
        return r.seg_gen + self.s - 1 - r.seg_step if r.decoding else r.generated

    def _refound(self, r: _Request) -> int:
        """The KV tokens a preempted request finds again in the prefix cache (vLLM V1: its blocks
        were freed newest-last into the free queue behind the blocks already free, keeping their
        hashes; each later allocation evicts from the queue's head, so what is left is a prefix of
        it, looked up in whole blocks and at most all but its last token;
        docs/research/gpu-memory-as-vllm-sees-it.md section 4)."""
        evicted = min(max(self.allocated - r.freed_mark, 0), r.freed)
        found = (r.cached + r.freed - evicted) // self.page_tokens * self.page_tokens
        return max(min(found, r.target - 1), r.cached)

    def _hold_cost(self, r: _Request) -> int:
        """KV tokens admitting r adds for what it holds: its own cached tokens, and the part of
        its group's shared prefix that no running request holds yet."""
        held = max(self.groups.get(r.group) or (0,))
        return r.computed - r.shared + max(r.shared - held, 0)

    def _release(self, r: _Request, kv: int) -> int:
        """KV tokens freed when r, holding `kv` tokens of context, leaves the running set: its
        own, and the part of its group's prefix that no other running request holds."""
        if not r.sharing:
            return kv
        holders = self.groups[r.group]
        before = max(holders)
        holders.remove(r.shared)
        r.sharing = False
        return kv - r.shared + before - max(holders, default=0)

    def _admit(self, r: _Request) -> None:
        r.freed = 0  # what it found again is held from now on
        self.waiting.popleft()
        self.running.append(r)
        if r.first_scheduled != r.first_scheduled:  # NaN: first time scheduled
            r.first_scheduled = self.t

    def _prefill(self, r: _Request, chunk: int, batch: _Batch) -> None:
        r.computed += chunk
        self.used += chunk
        self.allocated += chunk
        batch.budget -= chunk
        batch.prefill += chunk
        if r.computed == r.target:
            batch.completions.append(r)

    def _preempt(self, r: _Request, batch: _Batch) -> None:
        """Free r's KV, reset it to recompute prompt + generated tokens (vLLM V1 recompute); with
        prefix caching its freed blocks may be found again when it is readmitted (`_refound`).
        SGLang's retraction (`release_req`, schedule_batch.py @ fd3907ee) frees the tokens it
        decoded without caching them: only what its last prefill computed may be found again;
        it rejoins the queue at the tail."""
        batch.preempted += 1
        ahead, own = self.capacity - self.used, r.computed  # free tokens before its blocks
        if r.decoding:
            done = self.s - 1 - r.seg_step  # it last emitted a token at step s - 1
            kv = r.seg_kv + done
            own = kv
            r.generated = r.seg_gen + done
            self.decoders -= 1
            self.decode_kv -= kv
            self.used -= self._release(r, kv)
            r.decoding = False
            if r.seg_step == self.s:  # resumed for this step and preempted before it ran
                self.resumed.remove(r)  # it emits nothing, and its last token stays the same
            else:
                self.segments.close(r.index, r.seg_step, self.s - 1)
                r.last_token = self.t  # steps run back to back while it decodes
        else:
            self.used -= self._release(r, r.computed)
        if self.reservation is not None:  # SGLang caches what its last prefill computed, no more
            own = min(own, r.target)
        # The shared prefix stays in the prefix cache (others hold it); the rest is recomputed.
        r.computed = r.cached
        r.target = r.prompt + r.generated
        if self.refind:
            r.freed, r.freed_mark = max(own - r.cached, 0), self.allocated + ahead
        r.remote_kv = False
        r.epoch += 1
        r.preemptions += 1
        if self.reservation is None:
            self.waiting.appendleft(r)
        else:  # SGLang's `_add_request_to_queue`: the tail
            self.waiting.append(r)
            self.batch_full = False

    # ---- running a step ------------------------------------------------------------------
    def run(self, batch: _Batch) -> tuple[float, tuple]:
        """Time the scheduled step; returns its duration and its record's first counts."""
        decode = self.decoders + batch.new_tokens
        kv = self.decode_kv + batch.new_kv
        duration = float(self.scheduled_seconds(decode, batch.prefill, kv))
        if not duration > 0:
            raise _not_positive(duration)
        if self.jitter_list is not None:
            duration *= self.jitter_list[self.s % len(self.jitter_list)]
        queue = len(self.waiting) - self.next_ready  # the log adds the arrivals so far
        itl = self.decoders - len(self.resumed)  # a resumed decoder's ITL is its whole wait
        return duration, (decode, batch.prefill, len(self.running), queue,
                          batch.preempted, itl)  # fmt: skip

    def retire(self, end: float) -> None:
        """Requests whose last token is this step's leave and free their KV."""
        s = self.s
        for r, epoch in self.finishes.pop(s, ()):
            if epoch != r.epoch:
                continue
            kv = r.seg_kv + (s - r.seg_step)
            self.running.remove(r)
            self.batch_full = False
            r.decoding = False
            self.decoders -= 1
            self.decode_kv -= kv
            self.used -= self._release(r, kv)
            r.finish = end
            r.generated = r.output
            self.segments.close(r.index, r.seg_step, s)
            if self.slots is not None:
                self.send_next(end)

    def emit(self, completions: list, end: float, generation: int) -> tuple[int, int, int]:
        """Requests whose prefill completed emit a token and start (or resume) decoding.

        Returns the step's first tokens, prompt tokens completed and tokens generated."""
        s, first, prompt = self.s, 0, 0
        for r in completions:
            generation += 1
            if r.first_token != r.first_token:  # NaN: its first token
                r.first_token = end
                first += 1
                prompt += r.prompt
            else:
                self.segments.gap(r.index, end, end - r.last_token)
            r.remote_kv = False
            r.generated += 1
            if r.generated >= r.output:
                self.running.remove(r)
                self.batch_full = False
                self.used -= self._release(r, r.computed)
                r.finish = end
                self.segments.close(r.index, s, s)
                if self.slots is not None:
                    self.send_next(end)
                continue
            r.decoding = True
            self.decoders += 1
            self.decode_kv += r.computed
            r.seg_step, r.seg_kv, r.seg_gen = s, r.computed, r.generated
            last = s + r.output - r.generated
            if last not in self.finishes:
                self.finishes[last] = []
                heapq.heappush(self.finish_steps, last)
            self.finishes[last].append((r, r.epoch))
        return first, prompt, generation

    def send_next(self, end: float) -> None:
        """A request finished at `end`: the closed-loop client sends its next one then, or at
        that one's arrival if later. `vllm bench serve --max-concurrency` wraps each request in
        an asyncio.Semaphore, whose waiters acquire first come, first served
        (`limited_request_func` in vllm/benchmarks/serve.py, vllm-project/vllm @
        009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1); its clock (TTFT, E2E) starts once sent."""
        k = self.unsent
        if k < len(self.ready_seconds):
            sent = max(self.wanted[k], end)
            self.ready_seconds[k] = sent
            self.ready_array[k] = sent
            self.unsent = k + 1

    # ---- the fast path: a stretch of pure decode steps -------------------------------------
    def decode_stretch(self) -> bool:
        """Run steps where everyone decodes and nothing changes until a finish, KV or arrival.

        The stretch ends with the next step in which requests finish (retired at its end). With
        every sequence slot taken an arrival changes only the queue length, so the stretch runs
        through it and counts the queue per step."""
        d, running = self.decoders, self.running
        if d != len(running) or not d:
            return False
        full = d >= self.max_seqs or self.batch_full  # no admission until a request leaves
        if not (full or not self.waiting):
            return False
        finish = self.next_finish()
        steps = min(finish - self.s + 1, (self.capacity - self.used) // d, FAST_PATH_MAX_STEPS)
        if steps < FAST_PATH_MIN_STEPS:
            return False
        n = len(self.ready_seconds)
        arrival = self.ready_seconds[self.next_ready] if self.next_ready < n else math.inf
        if self.async_scheduling and arrival <= self.t and not full:
            return False  # it came during the last step: it joins the step after this one
        if self.recv is not None and arrival < math.inf:
            # SGLang sees an arrival only at a receiving pass: stop before the next one, where
            # `step` takes what came (nothing is taken before it, so no earlier limit)
            steps = min(steps, self.recv.turns_to_receive(self.recv_count))
            if steps < FAST_PATH_MIN_STEPS:
                return False
            arrival = math.inf
        limit = self.end_limit if full else min(arrival, self.end_limit)
        if steps > FAST_PATH_BOUND_STEPS and limit < math.inf:
            # Steps only lengthen as KV grows, so the first (at its shortest jitter) bounds how
            # many start before limit.
            first = float(self.scheduled_seconds(self.decoders, 0, self.decode_kv))
            if not first > 0:
                raise _not_positive(first)
            first *= self.jitter_min
            steps = min(steps, int((limit - self.t) / first) + 1)
        seconds = self.decode_times.lookup(d, self.decode_kv, steps)
        if seconds is not None or steps >= FAST_PATH_ARRAY_STEPS:
            starts, durations, end = self._stretch_arrays(steps, limit, seconds)
        else:
            starts, durations, end = self._stretch_loop(steps, limit)
        self._record_stretch(starts, durations, end, finish)
        return True

    def next_finish(self) -> float:
        """The next step in which a request finishes. A step whose scheduled finishes were all
        cancelled since (paused or preempted: `retire` skips them) is dropped, so it no longer
        cuts a stretch short (each prefill-only step leaves one per paused decoder)."""
        heap, finishes = self.finish_steps, self.finishes
        while heap:
            entries = finishes.get(heap[0])
            if entries is not None and any(epoch == r.epoch for r, epoch in entries):
                return heap[0]
            finishes.pop(heapq.heappop(heap), None)
        return math.inf

    def _record_stretch(self, starts, durations, end: float, finish) -> None:
        d, k = self.decoders, len(starts)
        running, kv_first = len(self.running), self.used + d
        self.used += k * d
        self.allocated += k * d
        self.decode_kv += k * d
        if self.reservation is not None:
            self.ratio = self.reservation.decayed(self.ratio, steps=k)
        if self.recv is not None:  # the first step's pass was counted in `step`
            self.recv_count = self.recv.after_decode_turns(self.recv_count, k - 1)
        self.last_prefill = False
        self.s += k - 1
        if self.s == finish:
            self.retire(end)
        queue = len(self.waiting) - self.next_ready  # the log adds the arrivals so far
        counts = (d, 0, running, queue, 0, d, kv_first, 0, 0, d)
        self.log.add_stretch(starts, durations, counts, self.used)
        self.s += 1
        self.t = end
        self.last_start = float(starts[-1])

    def _stretch_loop(self, steps: int, limit: float):
        starts, durations = [], []
        t, kv, d, step = self.t, self.decode_kv, self.decoders, self.scheduled_seconds
        jitter, s = self.jitter_list, self.s
        while True:
            duration = float(step(d, 0, kv))
            if not duration > 0:
                raise _not_positive(duration)
            if jitter is not None:
                duration *= jitter[(s + len(starts)) % len(jitter)]
            starts.append(t)
            durations.append(duration)
            t += duration
            kv += d
            if len(starts) >= steps or t >= limit:
                return starts, durations, t

    def _stretch_arrays(self, steps: int, limit: float, seconds: np.ndarray | None):
        check = seconds is None or not self.jitter_min > 0  # tabulated times are all > 0
        if seconds is None:
            d = self.decoders
            seconds = self.decode_times.times(d, np.arange(steps) * d + self.decode_kv)
        if self.jitter is not None:
            a, size = self.s % self.jitter.size, self.jitter.size
            at = slice(a, a + steps) if a + steps <= size else (a + np.arange(steps)) % size
            seconds = seconds * self.jitter[at]
        if check and not seconds.min() > 0:
            raise ConfigError("step function returned a step of <= 0 s; must be > 0")
        clock = np.empty(steps + 1)
        clock[0], clock[1:] = self.t, seconds
        # Sequential sums, so each start equals the previous start + duration exactly.
        np.add.accumulate(clock, out=clock)
        k = steps
        if not clock[-2] < limit:  # steps starting at or after it wait for the arrival (or end)
            k = int(clock[:-1].searchsorted(limit, side="left"))
        return clock[:k], seconds[:k], float(clock[k])

    # ---- the end ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the token segments of requests still decoding when the run stopped."""
        last = self.s - 1
        for r in self.running:
            if r.decoding:
                self.segments.close(r.index, r.seg_step, last)
                r.generated = r.seg_gen + (last - r.seg_step)

    def sent_seconds(self) -> np.ndarray:
        """When each request reached the engine (a closed loop's send times; inf: never sent)."""
        return self.ready_array

    def request_arrays(self) -> dict[str, np.ndarray]:
        """Per-request results in workload order."""
        rs = self.requests
        return {
            "first_scheduled": np.array([r.first_scheduled for r in rs], dtype=float),
            "first_token": np.array([r.first_token for r in rs], dtype=float),
            "finish": np.array([r.finish for r in rs], dtype=float),
            "generated": np.array([r.generated for r in rs], dtype=np.int64),
            "preemptions": np.array([r.preemptions for r in rs], dtype=np.int64),
        }
