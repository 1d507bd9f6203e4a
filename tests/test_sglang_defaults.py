"""SGLang's start-up defaults against its source, and `itlkit simulate --engine sglang`.

Expected values are SGLang's own table and formulas (python/sglang/srt/arg_groups/memory_hook.py
@ 031ed82d8b5ec8db9cf88cffb057c2e91c964262, `handle_gpu_memory_settings`), applied here by hand.
"""

import json

import pytest

from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.sim.sglang import chunk_tier, default_mem_fraction, sglang_settings

GIB, MIB = 2**30, 2**20


@pytest.mark.parametrize(
    ("gib", "chunk"),
    [
        (15.0, 2048),  # "< 20 * 1024" MiB
        (19.99, 2048),
        (20.0, 4096),  # not below 20 GiB: the next tier (strict <)
        (23.6, 4096),  # RTX 4090 / A10: "A10, 4090, 5090"
        (39.4, 4096),  # A100 40GB: below 60 GiB
        (79.2, 8192),  # H100 80GB as CUDA counts it
        (89.99, 8192),
        (131.0, 8192),  # H200
        (160.0, 16384),  # not below 160 GiB
        (178.4, 16384),  # B200
    ],
)
def test_the_chunk_size_follows_sglangs_memory_table(gib, chunk):
    assert chunk_tier(gib * GIB)[0] == chunk


def test_the_static_memory_share_of_an_h100_derived_by_hand():
    # H100 80GB, CUDA total 85,045,477,376 B = 81,105.69 MiB. reserved = 512 + 1.5 x 8,192
    # (chunk) + 2 x 256 (graph batch) + 1,024 / 8 x 1 (GPU) = 13,440 MiB, above the 10 GiB
    # floor: (81,105.69 - 13,440) / 81,105.69 = 0.83429 -> 0.834
    total = 85_045_477_376
    assert total / MIB == 81_105.6875
    assert default_mem_fraction(total, chunk_tokens=8192, graph_batch=256) == 0.834
    # a GPU above 60 GiB keeps at least 10 GiB: with a 2,048 chunk and no graphs reserved is
    # 512 + 3,072 + 128 = 3,712 MiB, raised to 10,240: (81,105.69 - 10,240) / 81,105.69 = 0.87374
    assert default_mem_fraction(total, chunk_tokens=2048, graph_batch=0) == 0.874
    # ... and one below does not: an A100 40GB (40,339.31 MiB), chunk 4,096, graphs 32:
    # 512 + 6,144 + 64 + 128 = 6,848 -> (40,339.31 - 6,848) / 40,339.31 = 0.83024 -> 0.830
    assert default_mem_fraction(42_298_834_944, chunk_tokens=4096, graph_batch=32) == 0.830


def test_the_running_request_cap_follows_the_kv_pool():
    s = sglang_settings(gpu_memory_bytes=80 * GIB)
    # pool = min(max(KV / context x 512, 2,048), 4,096), cap = min(KV // 2, pool)
    assert s.with_kv_tokens(400_000, context_tokens=32_768).max_running_requests == 4096  # 6,250
    assert s.with_kv_tokens(100_000, context_tokens=32_768).max_running_requests == 2048  # 1,562
    assert s.with_kv_tokens(3_000, context_tokens=32_768).max_running_requests == 1500  # KV // 2
    assert s.with_kv_tokens(200_000, context_tokens=32_768).max_running_requests == 3125


def test_given_settings_win_and_each_default_is_said():
    s = sglang_settings(gpu_memory_bytes=80 * GIB, given={"chunked_prefill_size": 4096})
    assert s.chunked_prefill_size == 4096 and s.max_prefill_tokens == 16384
    said = "\n".join(s.assumptions)
    assert "chunked_prefill_size" not in said  # given, not assumed
    assert "max_prefill_tokens 16,384" in said and "enable_mixed_chunk off" in said
    config = s.with_kv_tokens(400_000, context_tokens=8192).scheduler_config()
    assert config.prefill_only_steps and config.max_num_batched_tokens == 4096
    mixed = sglang_settings(gpu_memory_bytes=80 * GIB, given={"enable_mixed_chunk": True})
    assert not mixed.with_kv_tokens(10**6, context_tokens=8192).scheduler_config(
    ).prefill_only_steps  # fmt: skip


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="chunked_prefill_size must be an integer >= 1"):
        sglang_settings(gpu_memory_bytes=80 * GIB, given={"chunked_prefill_size": 0})
    with pytest.raises(ValueError, match="unknown settings"):
        sglang_settings(gpu_memory_bytes=80 * GIB, given={"max_num_seqs": 4})


def _simulate(capsys, *flags):
    code = main(["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json",
                 "--num-prompts", "12", "--request-rate", "inf", "--prompt-tokens", "12000",
                 "--output-tokens", "64", *flags])  # fmt: skip
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_sglang_says_what_it_assumed_and_stalls_the_decodes(capsys):
    # 12 prompts of 12,000 tokens at once; the chunk is 8,192: SGLang prefills them in batches
    # that run alone, so a stream that has its first token waits for whole prefill batches
    alone = _simulate(capsys, "--engine", "sglang")
    mixed = _simulate(capsys, "--engine", "sglang", "--enable-mixed-chunk")
    assert alone["engine"] == "SGLang" and alone["config"]["prefill_only_steps"] is True
    assert any("chunked_prefill_size 8,192" in a for a in alone["assumptions"])
    assert any(a.startswith("max_running_requests") for a in alone["assumptions"])
    assert mixed["config"]["prefill_only_steps"] is False
    # the same prompts, the same chunk: the first tokens come no sooner with mixing
    assert mixed["ttft_mean_seconds"] >= alone["ttft_mean_seconds"]
    # a prefill batch of 8,192 tokens takes far longer than a decode step: in SGLang's default
    # the streams that started wait out whole batches; mixed, they decode in each
    assert alone["itl_p99_seconds"] > mixed["itl_p99_seconds"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--engine", "sglang", "--max-num-seqs", "8"],
         "--max-num-seqs is a vLLM setting; --engine sglang calls it --max-running-requests"),
        (["--enable-mixed-chunk"], "--enable-mixed-chunk is an SGLang setting (give --engine "
                                   "sglang)"),
        (["--engine", "sglang", "--gpu-memory-utilization", "0.8"],
         "calls it --mem-fraction-static"),
        (["--engine", "sglang", "--disaggregated"], "--disaggregated is a vLLM setting"),
    ],
)  # fmt: skip
def test_a_flag_of_the_other_engine_is_one_clear_line(capsys, flags, message):
    code = main(["simulate", "--duration", "5", *flags])
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
