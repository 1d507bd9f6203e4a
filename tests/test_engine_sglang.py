"""SGLang's schedule, traced by hand: a prefill batch runs alone and every running stream waits.

SGLang's scheduler runs a prefill batch whenever it can form one, before the running batch
decodes (`Scheduler.get_next_batch_to_run`); a prompt longer than `--chunked-prefill-size` is
split over several such batches. With `--enable-mixed-chunk` the running decodes ride in the
prefill batch instead, and the chunk shrinks by one token per decode. (Citations with file and
commit in `itlkit/sim/sglang.py`.)

The step function is linear and chosen so the sums can be done by hand:
    step = 20 ms + 10 us per prompt token + 1 ms per decode token.
A, B, C, D: prompts of 100 tokens at t = 0, 50 output tokens each.
E: a prompt of 6,000 tokens at t = 0.1 s, 2 output tokens. Chunk size 2,048.

Step 0 prefills A-D together (400 tokens): 20 + 4 = 24 ms; first tokens at 0.024 s.
Steps 1-4 decode A-D: 20 + 4 = 24 ms each; step 4 runs [0.096, 0.120). E arrived at 0.1, so it
joins the queue at step 5, which starts at 0.120.
"""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.sglang import sglang_settings
from itlkit.sim.workload import make_workload

CHUNK = 2048
GIB = 2**30


def _step(*, decode_tokens, prefill_tokens, kv_tokens):
    return 0.020 + 1e-5 * prefill_tokens + 1e-3 * decode_tokens


def _run(*, mixed: bool):
    settings = sglang_settings(
        gpu_memory_bytes=80 * GIB,
        given={"chunked_prefill_size": CHUNK, "max_running_requests": 16,
               "enable_mixed_chunk": mixed},
    )  # fmt: skip
    w = make_workload(arrival_seconds=[0, 0, 0, 0, 0.1], prompt_tokens=[100] * 4 + [6000],
                      output_tokens=[50] * 4 + [2])  # fmt: skip
    return simulate(w, step_function=_step, kv_capacity_tokens=100_000,
                    config=settings.scheduler_config())  # fmt: skip


def test_a_prefill_batch_stalls_every_running_stream():
    r = _run(mixed=False)
    # Steps 5, 6: E's chunks of 2,048 alone (20 + 20.48 ms); step 7: its last 1,904 (20 + 19.04);
    # E's first token ends step 7. Step 8: five decodes (25 ms).
    assert list(r.step_prefill_tokens[:9]) == [400, 0, 0, 0, 0, 2048, 2048, 1904, 0]
    assert list(r.step_decode_tokens[:9]) == [0, 4, 4, 4, 4, 0, 0, 0, 5]
    a = r.token_times_seconds(0)
    assert a[4] == pytest.approx(0.120, abs=1e-12)
    # A's next token waits for the three prefill batches and the decode step after them
    stall = 0.04048 + 0.04048 + 0.03904 + 0.025
    assert a[5] - a[4] == pytest.approx(stall, abs=1e-12)  # 145 ms where a step takes 24
    assert r.first_token_seconds[4] == pytest.approx(0.120 + 0.04048 * 2 + 0.03904, abs=1e-12)
    # one ITL of 145 ms per running stream, one for each of A-D
    assert (abs(r.itl_seconds - stall) < 1e-9).sum() == 4


def test_mixed_chunks_let_the_decodes_ride_along():
    r = _run(mixed=True)
    # the chunk gives up one token per decode: 2,044, 2,044, then the last 1,912 of E's prompt;
    # each step 20 ms + the chunk + 4 decodes: 44.44, 44.44, 43.12 ms; then 5 decodes, 25 ms
    assert list(r.step_prefill_tokens[:9]) == [400, 0, 0, 0, 0, 2044, 2044, 1912, 0]
    assert list(r.step_decode_tokens[:9]) == [0, 4, 4, 4, 4, 4, 4, 4, 5]
    gaps = r.token_times_seconds(0)[4:9]
    assert list(gaps[1:] - gaps[:-1]) == pytest.approx([0.04444, 0.04444, 0.04312, 0.025],
                                                       abs=1e-12)  # fmt: skip
    # E's first token comes at the same step's end as without mixing, a little later in time
    assert r.first_token_seconds[4] == pytest.approx(0.120 + 0.04444 * 2 + 0.04312, abs=1e-12)
    assert r.itl_seconds.max() == pytest.approx(0.04444, abs=1e-12)


@settings(max_examples=80, deadline=None)
# a decoder resumed after a prefill batch and preempted in the same step emitted nothing: it
# once counted an ITL (46 observations for 45 tokens after the first)
@example(arrivals=[0.0] * 8, prompts=[1, 1, 1, 1, 28, 90, 90, 45, 1, 1, 1, 1],
         outputs=[1, 1, 10, 10, 10, 10, 10, 1, 1, 1, 1, 1], capacity=254, seqs=6,
         chunk=4)  # fmt: skip
@given(
    arrivals=st.lists(st.floats(0, 20), min_size=1, max_size=12),
    prompts=st.lists(st.integers(1, 90), min_size=12, max_size=12),
    outputs=st.lists(st.integers(1, 30), min_size=12, max_size=12),
    capacity=st.integers(130, 300),
    seqs=st.integers(1, 6),
    chunk=st.integers(4, 64),
)
def test_sglang_runs_keep_their_books(arrivals, prompts, outputs, capacity, seqs, chunk):
    # whatever the traffic, chunk and KV pressure: every request finishes with all its tokens,
    # one ITL per token after the first, the KV held never passes the capacity and all comes
    # back, and no step both prefills and decodes
    n = len(arrivals)
    w = make_workload(arrival_seconds=sorted(arrivals), prompt_tokens=prompts[:n],
                      output_tokens=outputs[:n])  # fmt: skip
    config = SchedulerConfig(max_num_batched_tokens=chunk, max_num_seqs=seqs,
                             enable_chunked_prefill=True, prefill_only_steps=True)  # fmt: skip
    r = simulate(w, step_function=constant_step_function(0.5), kv_capacity_tokens=capacity,
                 config=config)  # fmt: skip
    assert r.finished.all()
    assert list(r.generated_tokens) == outputs[:n]
    assert len(r.itl_seconds) == sum(o - 1 for o in outputs[:n])
    assert r.step_kv_tokens.max() <= capacity and r.step_kv_tokens[-1] == 0
    assert not ((r.step_prefill_tokens > 0) & (r.step_decode_tokens > 0)).any()
    assert r.step_prefill_tokens.max() <= chunk
