"""The workload a runs-file run sent, rebuilt request by request (`itlkit-runs/1`).

inference-perf's client, as `data/real-runs/README.md` describes it:

* **Arrivals** (`poisson-fixed-count`, its `constant` load): each stage sends exactly
  rate x duration requests; their gaps are drawn exponential and rescaled to fill the stage.
* **Prompts**: a fixed list of `system_prompts x prompts_per_system_prompt` distinct prompts
  (100 here), each "system prompt + question" plus the template tokens re-tokenisation adds,
  cycled in order: request k sends prompt k mod 100.
* **Outputs**: `ignore_eos`, so every request generates `output_tokens_mean` tokens (rounded).

vLLM's automatic prefix cache then serves every full 16-token block of a prompt that is still
cached: a prompt's own blocks after its first use, and the system prompt's blocks that its group
shares after the group's first use. The cache is an LRU of blocks in the KV memory that running
requests leave free; `prefix_cache_hits` replays it over the request order with a capacity the
caller gives. The engine then holds each system prompt's cached blocks once while any request
that hit them runs (`Workload.shared_prompt_tokens`, `prefix_group`).

Runs may describe other clients (the format's optional fields, `runs.ARRIVALS`): `vllm bench
serve`'s (`arrival` "vllm-bench": `num_prompts` at `request_rate_per_second`, inf a burst), a
closed loop (`max_concurrency`), prompts and outputs drawn per request from a distribution,
and a share of requests that resend an earlier prompt, which the same prefix-cache replay
serves (`repeat_prompts`). `vllm bench serve` sends its first prompt once before it starts
measuring, so its request 0 finds that prompt cached (`ready_check_cached`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from itlkit.errors import ConfigError
from itlkit.sim.lengths import Fixed
from itlkit.sim.runs import DEFAULT_PROMPT_TEMPLATE_TOKENS, Run
from itlkit.sim.workload import Seed, Workload, bench_arrivals, make_rng, make_workload


@dataclass(frozen=True)
class PromptSet:
    """The distinct prompts a run cycles: tokens of each and the system-prompt blocks shared."""

    prompt_tokens: np.ndarray  # one entry per distinct prompt
    group: np.ndarray  # which system prompt each one starts with
    shared_tokens: int  # tokens of the system prompt (after re-tokenisation)


class UnknownWorkload(ConfigError):
    """A run whose file does not say enough to rebuild its traffic (unknown rates)."""


def fixed_count_arrivals(stages, *, seed: Seed = None) -> np.ndarray:
    """inference-perf `constant` load: rate x duration arrivals per stage, exponential gaps
    rescaled so that the stage's gaps sum to its duration (first arrival at the stage start)."""
    rng = make_rng(seed)
    start, out = 0.0, []
    for stage in stages:
        count = stage.requests
        if count:
            gaps = rng.exponential(1.0, size=count)
            offsets = np.concatenate(([0.0], np.cumsum(gaps[:-1]))) / gaps.sum()
            out.append(start + offsets * stage.duration_seconds)
        start += stage.duration_seconds
    return np.concatenate(out) if out else np.zeros(0)


def prompt_set(run: Run) -> PromptSet:
    """The run's distinct prompts: system prompt + question + template tokens each."""
    w = run.workload
    needed = ("system_prompts", "prompts_per_system_prompt", "system_prompt_tokens",
              "question_tokens")  # fmt: skip
    missing = [name for name in needed if getattr(w, name) is None]
    if missing:
        raise UnknownWorkload(
            f"run {run.id!r}: the file does not give the prompt shape ({', '.join(missing)})"
        )
    template = w.prompt_template_tokens
    template = DEFAULT_PROMPT_TEMPLATE_TOKENS if template is None else template
    tokens = w.prompt_tokens
    # Re-tokenisation stretches system prompt and question alike.
    raw = w.system_prompt_tokens + w.question_tokens + template
    shared = int(w.system_prompt_tokens * tokens / raw)
    n = w.system_prompts * w.prompts_per_system_prompt
    return PromptSet(
        prompt_tokens=np.full(n, tokens, dtype=np.int64),
        group=np.arange(n) // w.prompts_per_system_prompt,
        shared_tokens=shared,
    )


def prefix_cache_hits(
    prompts: PromptSet, order: np.ndarray, *, capacity_blocks: int, block_size: int = 16
) -> np.ndarray:
    """Cached prompt tokens of each request (`order`: the prompt index each request sends).

    A full block is a hit when it is still in an LRU cache of `capacity_blocks` blocks; shared
    system-prompt blocks are one entry per group, stored once. The last token of a prompt is
    always computed (vLLM recomputes a fully cached prompt's last block's token).
    """
    if capacity_blocks < 1:
        raise ConfigError(f"prefix cache capacity must be >= 1 block, got {capacity_blocks}")
    key = (*map(_array_key, (prompts.prompt_tokens, prompts.group, np.asarray(order))),
           int(prompts.shared_tokens), int(capacity_blocks), int(block_size))  # fmt: skip
    if key not in _KNOWN_HITS:
        if len(_KNOWN_HITS) >= KNOWN_HITS_MAX:
            _KNOWN_HITS.pop(next(iter(_KNOWN_HITS)))
        _KNOWN_HITS[key] = _lru_hits(prompts, order, capacity_blocks, block_size)
    return _KNOWN_HITS[key].copy()


# A run's hits are the same in every simulation of it (a fit simulates each run some thirty
# times, and the LRU walk is a quarter of a short run's time): remembered per process, oldest
# out first. The key is the inputs' bytes, so a different prompt set never finds another's.
KNOWN_HITS_MAX = 256
_KNOWN_HITS: dict = {}


def _array_key(values: np.ndarray) -> tuple:
    return values.dtype.str, values.shape, values.tobytes()


def _lru_hits(prompts: PromptSet, order, capacity_blocks: int, block_size: int) -> np.ndarray:
    cache: OrderedDict = OrderedDict()
    shared_blocks = prompts.shared_tokens // block_size
    hits = np.zeros(len(order), dtype=np.int64)
    for k, p in enumerate(order.tolist()):
        tokens = int(prompts.prompt_tokens[p])
        full = (tokens - 1) // block_size  # blocks that can be served (the last token is not)
        group = int(prompts.group[p])
        keys = [("s", group, b) if b < shared_blocks else ("p", p, b) for b in range(full)]
        run = 0
        for key in keys:  # a prefix hit stops at the first missing block
            if key not in cache:
                break
            run += 1
        hits[k] = run * block_size
        for key in keys:
            if key in cache:
                cache.move_to_end(key)
            else:
                cache[key] = None
                if len(cache) > capacity_blocks:
                    cache.popitem(last=False)
    return hits


def repeat_prompts(
    workload: Workload, *, share: float, capacity_blocks: int, block_size: int = 16,
    seed: Seed = None,
) -> Workload:  # fmt: skip
    """`workload` where a `share` of requests resend an earlier request's prompt, and what the
    prefix cache serves of them.

    Request k > 0 repeats with probability `share`; it then takes the prompt of a request drawn
    uniformly among the k before it (so a popular prompt is picked more often), and with it
    that prompt's length, cached system prompt and prefix group; its arrival and output stay
    its own. The repeats' hits come from `prefix_cache_hits` over the distinct prompts (each
    one's blocks its own, an LRU of `capacity_blocks` blocks); a request keeps the larger of
    those hits and the system-prompt tokens it already had cached. So the share of requests
    whose prompt was seen before is `share` x (n - 1) / n."""
    if isinstance(share, bool) or not 0 <= share <= 1:  # NaN fails too
        raise ConfigError(f"the repeat share must be from 0 to 1, got {share!r:.40}")
    rng = make_rng(seed)
    n = workload.num_requests
    repeats = rng.random(n) < share
    repeats[:1] = False  # the first request has nothing to repeat
    earlier = np.floor(rng.random(n) * np.arange(n)).astype(np.int64)  # uniform in [0, k)
    first = list(range(n))  # the request that first sent each request's prompt
    for k in np.flatnonzero(repeats).tolist():  # in order: earlier[k] < k is resolved
        first[k] = first[earlier[k]]
    first = np.asarray(first, dtype=np.int64)
    distinct, order = np.unique(first, return_inverse=True)
    w = workload
    prompts = PromptSet(
        prompt_tokens=w.prompt_tokens[distinct],
        group=np.arange(distinct.size),
        shared_tokens=0,
    )
    hits = prefix_cache_hits(prompts, order, capacity_blocks=capacity_blocks,
                             block_size=block_size)  # fmt: skip
    return replace(
        w,
        prompt_tokens=w.prompt_tokens[first],
        cached_prompt_tokens=np.maximum(w.cached_prompt_tokens[first], hits),
        shared_prompt_tokens=w.shared_prompt_tokens[first],
        prefix_group=w.prefix_group[first],
    )


def unknown_workload(run: Run) -> str | None:
    """Why `run_workload` cannot rebuild the run's requests (None: it can), for a caller that
    sorts runs before simulating them (the calibration's `simulable`)."""
    w = run.workload
    if w.requests is None:
        return "arrival rates unknown (stages null)"
    if w.draws_prompts:
        return None if w.prompt_distribution or w.prompt_tokens else "prompt lengths unknown"
    needed = (w.system_prompts, w.prompts_per_system_prompt, w.system_prompt_tokens,
              w.question_tokens)  # fmt: skip
    return "prompt shape unknown" if None in needed else None


def run_workload(run: Run, *, capacity_blocks: int, seed: Seed = 0) -> Workload:
    """The requests the run's client sent, with the prefix cache's hits (`capacity_blocks`:
    KV blocks the prefix cache may keep)."""
    w = run.workload
    rng = make_rng(seed)
    if w.arrival == "vllm-bench":
        arrival = bench_arrivals(num_prompts=w.num_prompts, seed=rng,
                                 request_rate_per_second=w.request_rate_per_second,
                                 burstiness=w.burstiness)  # fmt: skip
    elif w.stages is None:
        raise UnknownWorkload(
            f"run {run.id!r}: its arrival rates are unknown (workload {w.name!r} has "
            "stages null), so it cannot be simulated without guessing them"
        )
    else:
        arrival = fixed_count_arrivals(w.stages, seed=rng)
    if w.draws_prompts:
        return _drawn_prompts(run, arrival, capacity_blocks=capacity_blocks, rng=rng)
    prompts = prompt_set(run)
    order = np.arange(arrival.size) % prompts.prompt_tokens.size
    cached = prefix_cache_hits(
        prompts, order, capacity_blocks=capacity_blocks, block_size=run.block_size
    )
    output = _outputs(run, arrival.size, rng)
    # The hits inside the system prompt's full blocks are the group's: held once while in use.
    shared = np.minimum(cached, prompts.shared_tokens // run.block_size * run.block_size)
    return make_workload(
        arrival_seconds=arrival,
        prompt_tokens=prompts.prompt_tokens[order],
        output_tokens=output,
        cached_prompt_tokens=cached,
        shared_prompt_tokens=shared,
        prefix_group=prompts.group[order],
        max_concurrency=w.max_concurrency,
    )


def _outputs(run: Run, n: int, rng: np.random.Generator):
    """Output tokens of n requests: drawn from the run's distribution, else `generated_tokens`."""
    dist = run.workload.output_distribution
    return generated_tokens(run) if dist is None else dist.sample(rng, size=n)


def _drawn_prompts(run: Run, arrival, *, capacity_blocks: int, rng) -> Workload:
    """Requests whose prompts are drawn one by one (no prompt cycle), a share of them resending
    an earlier prompt; without repeats nothing is cached (each prompt is new)."""
    w = run.workload
    dist = w.prompt_distribution
    if dist is None:
        if w.prompt_tokens is None:
            raise UnknownWorkload(
                f"run {run.id!r}: the file gives no prompt length (prompt_tokens_mean or "
                "prompt_tokens_distribution)"
            )
        dist = Fixed(w.prompt_tokens)
    n = arrival.size
    workload = make_workload(
        arrival_seconds=arrival,
        prompt_tokens=dist.sample(rng, size=n),
        output_tokens=_outputs(run, n, rng),
        max_concurrency=w.max_concurrency,
    )
    if w.arrival == "vllm-bench":
        workload = ready_check_cached(workload, capacity_blocks=capacity_blocks,
                                      block_size=run.block_size)  # fmt: skip
    if w.prompts_sent_before:
        workload = sent_before_cached(
            workload,
            w.prompts_sent_before,
            capacity_blocks=capacity_blocks,
            block_size=run.block_size,
            prefix_tokens=w.prefix_tokens_sent_before,
        )
    if not w.repeat_share:
        return workload
    return repeat_prompts(workload, share=w.repeat_share, capacity_blocks=capacity_blocks,
                          block_size=run.block_size, seed=rng)  # fmt: skip


def ready_check_cached(workload: Workload, *, capacity_blocks: int, block_size: int) -> Workload:
    """`workload` whose first request finds its prompt's full blocks in the prefix cache.

    `vllm bench serve` sends its first prompt once, and waits for the answer, before the
    measured requests start ("Starting initial single prompt test run...": `benchmark()` in
    vllm/benchmarks/serve.py @def9ce85, unless --ready-check-timeout-sec 0; unconditionally in
    benchmarks/benchmark_serving.py @8668d7c0), then sends that prompt again as request 0. With
    the prefix cache on, request 0 computes only what follows its last full cached block (and
    the last token); a server without it computes it whole (the caller clears the hits)."""
    if not workload.num_requests:
        return workload
    tokens = int(workload.prompt_tokens[0])
    blocks = min((tokens - 1) // block_size, capacity_blocks)
    cached = workload.cached_prompt_tokens.copy()
    cached[0] = max(int(cached[0]), blocks * block_size)
    return replace(workload, cached_prompt_tokens=cached)


def sent_before_cached(workload: Workload, sent: int, *, capacity_blocks: int,
                       block_size: int, prefix_tokens: int | None = None) -> Workload:  # fmt: skip
    """`workload` whose first `sent` requests find their prompts' full blocks in the prefix
    cache: an earlier run on the same server sent those prompts, as a repeated `vllm bench
    serve --seed` does (the random and ShareGPT datasets draw the same prompts from the same
    seed: vllm/benchmarks/datasets.py @ 0056b87fc1fda2642f39dda4392824c425dd1638). The cache is
    an LRU: the prompts sent last survive first, as many as `capacity_blocks` hold (the earlier
    run's outputs are not counted against it). A server without a prefix cache computes them
    whole (the caller clears the hits).

    `prefix_tokens`: the earlier run sent only each prompt's first that many tokens: the full
    blocks of that start are found. The random dataset's prompt i is the token ids
    `offset_i + i + arange(input_len)` (modulo the allowed tokens), its lengths and offsets drawn
    from the seed (`RandomDataset.get_sampling_params` and `generate_token_sequence`,
    vllm/benchmarks/datasets.py lines 620-622 and 651-653 of the vLLM 0.14.1 wheel), so under
    the same seed and a fixed length a shorter `--random-input-len` sent each prompt's start."""
    cached = workload.cached_prompt_tokens.copy()
    room = capacity_blocks
    for k in range(min(sent, workload.num_requests) - 1, -1, -1):
        prompt = int(workload.prompt_tokens[k])
        if prefix_tokens is not None and prefix_tokens < prompt:
            blocks = prefix_tokens // block_size  # the full blocks of the shared start
        else:
            blocks = (prompt - 1) // block_size  # the last token recomputed
        if blocks > room:
            break
        room -= blocks
        cached[k] = max(int(cached[k]), blocks * block_size)
    return replace(workload, cached_prompt_tokens=cached)


def generated_tokens(run: Run) -> int:
    """Tokens the server generates per request. With `ignore_eos` it runs to the client's
    `max_tokens` (the target) even where the client counts fewer (Llama-2-7B codegen: a median
    of 247 counted, a mean of 195.09, yet per-token gaps of 8.29 ms against an ITL mean of
    10.58 ms: the server streamed 247 tokens, the client counted 195 of them on average)."""
    w = run.workload
    if w.ignore_eos and w.output_tokens_target and w.output_tokens_target > w.output_tokens_mean:
        return round(w.output_tokens_target)
    return max(round(w.output_tokens_mean), 1)


def prompt_cycle_blocks(run: Run) -> int:
    """Full blocks the distinct prompts hold in all, shared system prompts once (what the
    prefix cache must keep to serve every prompt after its first use). Prompts drawn per
    request: the expected distinct prompts' blocks, 0 when none repeats."""
    w = run.workload
    if w.draws_prompts:
        if not w.repeat_share or not w.requests:
            return 0
        distinct = 1 + (w.requests - 1) * (1 - w.repeat_share)
        return math.ceil(distinct * (((w.prompt_tokens or 1) - 1) // run.block_size))
    prompts = prompt_set(run)
    size = run.block_size
    shared = prompts.shared_tokens // size
    own = ((prompts.prompt_tokens - 1) // size - shared).clip(min=0)
    return int(own.sum() + shared * (int(prompts.group.max()) + 1))
