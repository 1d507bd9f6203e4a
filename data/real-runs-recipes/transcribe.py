"""Transcribe every "Serving Benchmark Result" block of vllm-project/recipes into transcribed.json.

Run: .venv/bin/python data/real-runs-recipes/transcribe.py [MIRROR] [-o transcribed.json]

MIRROR is a git copy of github.com/vllm-project/recipes holding all its refs (branches and
`refs/pull/*`); default /work/.mirror/vllm-project+recipes/repo. Every commit of every ref is
read, so blocks that later versions removed are found too. A block is the text from a line
"==== Serving Benchmark Result ====" to the next line of "=" (or the end of its code fence);
two blocks are the same when their lines are equal after stripping spaces. Each distinct block is
kept once, at the commit with the earliest committer date that holds it ("first_seen"); every
other file version that holds it is listed with its first commit and its commit count.

The figures are parsed mechanically. The commands near each block (the code fences that run
`vllm serve` / the OpenAI server, and the last `vllm bench serve` / `benchmark_serving.py` fence
before the block) are found mechanically and quoted with their line numbers. What a block
means (the GPU, the server that ran it, keep or leave out) is the hand-written `ANNOTATIONS`
table below, one entry per block, each citing the lines it read; the script quotes those lines
from the cited file version, so every statement can be checked against the text.

Deterministic: the same mirror gives the same bytes.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MIRROR = Path("/work/.mirror/vllm-project+recipes/repo")
TEXT_SUFFIXES = (".md", ".yaml", ".yml", ".txt", ".mdx")
HEADER = re.compile(r"^\s*=+ ?Serving Benchmark Result ?=+\s*$")
RULE = re.compile(r"^\s*=+\s*$")
FIGURE = re.compile(r"^\s*([A-Za-z][^:]*?)\s*:\s*(\S.*?)\s*$")
SERVE = re.compile(r"vllm serve|api_server|vllm/vllm-openai|rocm/vllm")
CLIENT = re.compile(r"bench serve|benchmark_serving")

# vLLM releases by first upload to PyPI (https://pypi.org/pypi/vllm/json, the earliest
# `upload_time_iso_8601` of each release's files), for the rule "the release current at the
# commit date" where a file names no version.
PYPI_RELEASES = (
    ("0.9.2", "2025-07-08T04:48:54Z"),
    ("0.10.0", "2025-07-25T00:22:19Z"),
    ("0.10.1", "2025-08-19T02:18:10Z"),
    ("0.10.1.1", "2025-08-20T23:17:09Z"),
    ("0.10.2", "2025-09-13T23:00:25Z"),
    ("0.11.0", "2025-10-04T01:39:32Z"),
    ("0.11.1", "2025-11-19T01:55:10Z"),
    ("0.11.2", "2025-11-20T08:30:43Z"),
    ("0.12.0", "2025-12-03T11:37:24Z"),
    ("0.13.0", "2025-12-19T03:30:32Z"),
    ("0.14.0", "2026-01-20T10:50:00Z"),
    ("0.15.0", "2026-01-29T18:59:48Z"),
    ("0.15.1", "2026-02-05T00:18:12Z"),
    ("0.16.0", "2026-02-26T03:02:38Z"),
    ("0.17.0", "2026-03-07T03:54:02Z"),
    ("0.18.0", "2026-03-20T22:16:00Z"),
    ("0.19.0", "2026-04-03T04:04:52Z"),
    ("0.20.0", "2026-04-27T11:07:22Z"),
    ("0.21.0", "2026-05-15T00:08:22Z"),
    ("0.22.0", "2026-05-29T10:32:10Z"),
)

# ---- the hand-written reading of each block (keyed by the block's hash) -----------------------
# reasons: (key, why); the first is the main one. cite: the file version read and the lines
# that establish each fact. run: the fields of a kept block (make_runs.py maps them).

LEFT_OUT_REASONS = {
    "expert_or_data_parallel": "expert parallelism or data-parallel serving: itlkit's "
    "Deployment (physics/roofline.py) has tensor parallelism only",
    "speculative_decoding": "speculative decoding / MTP: itlkit cannot express it",
    "multi_node": "served across several nodes (TP/PP over 16 GPUs): itlkit cannot express it",
    "decode_context_parallel": "decode context parallelism (-dcp): itlkit cannot express it",
    "gpu_not_stated": "gpu not stated",
    "gpu_not_in_catalog": "the GPU the file names is not in itlkit's catalog",
    "template": "a template: the figures are placeholders (xxx or N)",
    "inconsistent": "the figures do not match the client command the file gives",
    "multimodal_dataset": "the client sends images (a multimodal dataset): itlkit simulates "
    "text tokens only",
    "architecture": "an architecture itlkit's Model cannot express",
    "no_config": "no config",
    "client_not_stated": "the client's command is not in the file (dataset, prompt count, "
    "length spread, ignore-eos unwritten)",
}


def _cite(commit: str, path: str, **lines) -> dict:
    return {"commit": commit, "path": path, "lines": lines}


def _out(*reasons, cite: dict, note: str = "", **facts) -> dict:
    return {
        "status": "left_out",
        "reasons": list(reasons),
        "cite": cite,
        "note": note,
        "facts": facts,
    }


DS_AMD = "DeepSeek/AMD_GPU/README.md"
L405 = "Llama/Llama3.1-405B-ROCm.md"
L70 = "Llama/Llama3.3-70B-ROCm.md"
QVL = "Qwen/Qwen2.5-VL.md"

_DS_R1_MODEL = {
    "hf_id": "deepseek-ai/DeepSeek-R1",
    "catalog": "deepseek-v3",
    "check": "DeepSeek-R1's config.json (a copy in the stored file index, file id 11140762058, "
    "whose repository the index does not name) has model_type deepseek_v3 and the catalog's "
    "fields: 61 layers, hidden 7168, 128 heads (128 KV), intermediate 18432, 256 routed + 1 "
    "shared experts, top-8, moe_intermediate 2048, first_k_dense_replace 3, q_lora 1536, kv_lora "
    "512, qk_nope 128, qk_rope 64, v_head 128, vocab 129280, untied; its quantization_config is "
    "fp8 (e4m3, 128x128 blocks). Its 1 MTP layer (num_nextn_predict_layers) is not loaded "
    "without speculative decoding",
}
_LLAMA_70B_MODEL = {
    "catalog": "llama-3.3-70b",
    "check": "the catalog's llama-3.3-70b (80 layers, hidden 8192, 64/8 heads, head_dim 128, "
    "intermediate 28672, vocab 128256, untied) equals AI-Hypercomputer/maxtext @ "
    "94959d07a381a3b8bc81469c4a4af18d5a90382f MaxText/utils/ckpt_conversion/utils/"
    "hf_model_configs.py llama31_70b_config (Llama 3.3 70B has Llama 3.1 70B's architecture); "
    "AMD's FP8-KV and MXFP4 checkpoints quantize it and keep its shape",
    "max_position_embeddings": 131072,
    "max_position_embeddings_source": "llama31_70b_config, max_position_embeddings=131072 "
    "(same file)",
}
_LLAMA_405B_MODEL = {
    "catalog": "llama-3.1-405b",
    "check": "the catalog's llama-3.1-405b (126 layers, hidden 16384, 128/8 heads, head_dim "
    "128, intermediate 53248, vocab 128256) equals AI-Hypercomputer/maxtext @ "
    "94959d07a381a3b8bc81469c4a4af18d5a90382f MaxText/utils/ckpt_conversion/utils/"
    "hf_model_configs.py llama31_405b_config; AMD's FP8-KV and MXFP4 checkpoints quantize it "
    "and keep its shape",
    "max_position_embeddings": 131072,
    "max_position_embeddings_source": "llama31_405b_config, max_position_embeddings=131072 "
    "(same file)",
}
_ROCM_SOURCE_BUILD = {
    "vllm_version": "0.11.2",
    "vllm_version_source": "release current at the commit date (2025-11-27): the file builds "
    "vLLM from the main branch inside rocm/vllm-dev:nightly (git clone, setup.py develop) and "
    "pins no version; 0.11.2 was the newest release on PyPI then (2025-11-20), so main was 0.11.2 "
    "or later",
}


def _llama_rocm(path, commit, *, heading, block, serve, hf_id, precision, catalog_model, doubts=()):
    """A Llama ROCm (MI355) block: TP 1, the client of run_performance.sh."""
    return {
        "status": "kept",
        "cite": _cite(
            commit,
            path,
            heading=heading,
            block=block,
            gpu=[30, 30],
            weights=[17, 20],
            image=[35, 46],
            vllm_from_main=[85, 91],
            serve=serve,
            client=[233 if path == L70 else 235, 253 if path == L70 else 255],
            flags_explained=[171, 176] if path == L405 else [169, 174],
        ),
        "run": {
            "model": {"hf_id": hf_id, **catalog_model},
            "gpu": {
                "name_in_file": "MI355",
                "itlkit": "mi355x",
                "count": 1,
                "why": "the file's GPU is 'MI355' (line 'GPU: MI355'); AMD's MI355 part is "
                "the Instinct MI355X (288 GB), the catalog's mi355x",
            },
            "tp": 1,
            "weights_precision": precision,
            "kv_cache_dtype": "fp8",
            "image": "rocm/vllm-dev:nightly, vLLM built from main",
            **_ROCM_SOURCE_BUILD,
            "engine": {
                "max_num_batched_tokens": 32768,
                "gpu_memory_utilization": 0.9,
                "prefix_caching": False,
                "async_scheduling": True,
                "max_model_len": None,
                "max_num_seqs": None,
                "block_size": None,
                "chunked_prefill": None,
            },
            "client": {
                "dataset": "random",
                "input_len": 8192,
                "output_len": 1024,
                "num_prompts": 128,
                "max_concurrency": 64,
                "request_rate": None,
                "ignore_eos": True,
                "range_ratio": None,
                "seed": 123,
                "percentile_metrics": "ttft,tpot,itl,e2el",
            },
            "table": "l405r" if path == L405 else "l70r",
            "doubts": list(doubts),
        },
    }


ANNOTATIONS = {
    # DeepSeek-R1 guide: a run with --enable_expert_parallel, on an unnamed Blackwell GPU.
    "31fcc0b25947": _out(
        "expert_or_data_parallel",
        "gpu_not_stated",
        cite=_cite(
            "ba1d9e23",
            "DeepSeek-R1/DeepSeek-R1.md",
            serve=[100, 113],
            ep=[110, 110],
            model_choice=[37, 49],
            gpu=[70, 72],
            client=[165, 178],
        ),
        note="the server passes --enable_expert_parallel; the model is FP8 or FP4 "
        "(MODEL set either way) and the GPU is only 'blackwell' (no type or count)",
    ),
    # DeepSeek-R1 on 8 MI300X, first version (concurrency 128).
    "f305e6586e70": {
        "status": "kept",
        "cite": _cite(
            "cbb075bc",
            DS_AMD,
            block=[59, 83],
            gpu=[4, 10],
            precision=[6, 7],
            image=[12, 26],
            serve=[38, 49],
            client=[52, 55],
        ),
        "run": {
            "model": {"hf_id": "deepseek-ai/DeepSeek-R1", **_DS_R1_MODEL},
            "gpu": {
                "name_in_file": "MI300X",
                "itlkit": "mi300x",
                "count": 8,
                "why": "line 'MI300X' under GPU TYPE and 'run DeepSeek-R1 models on AMD "
                "MI300X GPU'; 8 GPUs for --tensor-parallel-size 8",
            },
            "tp": 8,
            "weights_precision": "fp8",
            "kv_cache_dtype": None,
            "image": "rocm/vllm:latest",
            "vllm_version": "0.10.0",
            "vllm_version_source": "release current at the commit date (2025-08-07): the "
            "file runs the rocm/vllm:latest image, which names no version; 0.10.0 was the newest "
            "vLLM release on PyPI then (2025-07-25; 0.10.1 followed on 2025-08-19)",
            "engine": {
                "max_model_len": 32768,
                "max_num_seqs": 1024,
                "max_num_batched_tokens": 32768,
                "block_size": 1,
                "gpu_memory_utilization": None,
                "prefix_caching": None,
                "chunked_prefill": None,
                "vllm_use_v1": True,
            },
            "client": {
                "dataset": "random",
                "input_len": 3200,
                "output_len": 800,
                "num_prompts": 500,
                "max_concurrency": 128,
                "request_rate": None,
                "ignore_eos": True,
                "range_ratio": None,
                "percentile_metrics": "ttft,tpot,itl,e2el",
            },
            "table": "dsamd",
            "doubts": [
                "rocm/vllm:latest is AMD's ROCm build, whose vLLM may lag or lead the upstream "
                "release current at the commit date",
            ],
        },
    },
    # The same guide two hours later: max-model-len 65536, concurrency 256.
    "a26331f69552": {
        "status": "kept",
        "cite": _cite(
            "b7d325e0",
            DS_AMD,
            block=[95, 119],
            gpu=[4, 11],
            precision=[6, 7],
            image=[37, 51],
            serve=[62, 73],
            client=[88, 91],
        ),
        "run": {
            "model": {"hf_id": "deepseek-ai/DeepSeek-R1", **_DS_R1_MODEL},
            "gpu": {
                "name_in_file": "MI300X",
                "itlkit": "mi300x",
                "count": 8,
                "why": "'The model requires 8 * MI300X GPU.' and the rocm-smi listing of 8 devices",
            },
            "tp": 8,
            "weights_precision": "fp8",
            "kv_cache_dtype": None,
            "image": "rocm/vllm:latest",
            "vllm_version": "0.10.0",
            "vllm_version_source": "release current at the commit date (2025-08-07): the "
            "file runs the rocm/vllm:latest image, which names no version; 0.10.0 was the newest "
            "vLLM release on PyPI then (2025-07-25; 0.10.1 followed on 2025-08-19)",
            "engine": {
                "max_model_len": 65536,
                "max_num_seqs": 1024,
                "max_num_batched_tokens": 32768,
                "block_size": 1,
                "gpu_memory_utilization": None,
                "prefix_caching": None,
                "chunked_prefill": None,
                "vllm_use_v1": True,
            },
            "client": {
                "dataset": "random",
                "input_len": 3200,
                "output_len": 800,
                "num_prompts": 500,
                "max_concurrency": 256,
                "request_rate": None,
                "ignore_eos": True,
                "range_ratio": None,
                "percentile_metrics": "ttft,tpot,itl,e2el",
            },
            "table": "dsamd",
            "doubts": [
                "rocm/vllm:latest is AMD's ROCm build, whose vLLM may lag or lead the upstream "
                "release current at the commit date",
            ],
        },
    },
    "a5d53eb47a4d": _out(
        "inconsistent",
        "architecture",
        cite=_cite(
            "2b6bb7f2",
            "DeepSeek/DeepSeek-V3_2.md",
            gpu=[80, 80],
            serve=[24, 32],
            client=[82, 91],
            block=[98, 122],
        ),
        note="the client asks 200 prompts of 4000 in / 2000 out at 50 req/s; the block "
        "has 100 requests at concurrency 10 with 2048 / 1024 tokens each. DeepSeek-V3.2 adds "
        "DeepSeek Sparse Attention (an indexer), which itlkit's Model does not have",
    ),
    "119c414ebbc9": _out(
        "architecture",
        "no_config",
        cite=_cite(
            "2a7a0d34",
            "DeepSeek/DeepSeek-V3_2.md",
            gpu=[81, 81],
            serve=[25, 33],
            client=[83, 92],
            block=[99, 123],
        ),
        note="8 x H20, TP 8, random 2048/1024 at 10 req/s: consistent, but DeepSeek-V3.2's "
        "sparse attention (DSA indexer, model_type deepseek_v32) is not DeepSeek-V3's architecture "
        "and no copy of its config.json was found",
    ),
    "d3136b5755f0": _out(
        "gpu_not_stated",
        cite=_cite(
            "43f1bf57", "Ernie/Ernie4.5-VL.md", serve=[17, 21], client=[53, 66], block=[81, 102]
        ),
        note="the 28B server is '80G*1 GPU', a memory size, not a GPU type; later versions add "
        "H100 and MI300X/MI325X/MI355X headings for the serve commands, never for the benchmark",
    ),
    "5e164359723f": _out(
        "gpu_not_stated",
        cite=_cite(
            "43f1bf57", "Ernie/Ernie4.5.md", serve=[16, 19], client=[67, 79], block=[95, 116]
        ),
        note="'# 21B model 80G*1 GPU' only; from 8a8e9a66 (2026-03-05) the file has a serve "
        "command under 'Serving Ernie4.5 Model on H100 GPUs' and another (TP 4) for "
        "MI300X/MI325X/MI355X, and the benchmark names neither",
    ),
    "38c18a6c19ee": _out(
        "gpu_not_stated",
        cite=_cite("8b80dfd5", "GLM/GLM-4.5.md", serve=[22, 30], client=[43, 53], block=[70, 91]),
        note="no GPU anywhere in the file (the server serves GLM-4.5-Air-FP8, the client "
        "GLM-4.5-FP8); later versions name MI300X only for their AMD section",
    ),
    "ba0e6c6dd5a3": _out(
        "no_config",
        cite=_cite(
            "8b80dfd5",
            "GLM/GLM-4.5V.md",
            gpu=[15, 15],
            serve=[21, 31],
            client=[44, 54],
            block=[69, 90],
        ),
        note="GLM-4.5V-FP8 on 4 x H100, TP 4, 16 prompts of 8000/1000 at once: expressible, but "
        "no citable copy of zai-org/GLM-4.5V's config.json was found (glm4v_moe; a copy in the "
        "stored index, file id 62538297598, has no repository named)",
    ),
    "50024df7eb8e": _out(
        "expert_or_data_parallel",
        "multimodal_dataset",
        cite=_cite(
            "36c8bfca", "GLM/GLM-V.md", serve=[22, 33], ep=[30, 30], client=[44, 53], block=[60, 84]
        ),
    ),
    "e12305caeaed": _out(
        "expert_or_data_parallel",
        "multimodal_dataset",
        cite=_cite("36c8bfca", "GLM/GLM-V.md", serve=[22, 33], ep=[30, 30], block=[90, 114]),
    ),
    "54c2f3af58c1": _out(
        "expert_or_data_parallel",
        "multimodal_dataset",
        cite=_cite(
            "163a68df", "GLM/GLM-V.md", serve=[22, 34], ep=[30, 30], client=[45, 54], block=[61, 85]
        ),
    ),
    "9696073dde6b": _out(
        "expert_or_data_parallel",
        "multimodal_dataset",
        cite=_cite("669358a9", "GLM/GLM-V.md", serve=[22, 34], ep=[30, 30], block=[61, 85]),
    ),
    "c78aaf9ddd4c": _out(
        "speculative_decoding",
        cite=_cite(
            "5065990a",
            "GLM/GLM5.md",
            serve=[37, 46],
            mtp=[40, 41],
            gpu=[141, 141],
            client=[143, 154],
            block=[159, 183],
        ),
    ),
    "8ffd9ed70033": _out(
        "speculative_decoding",
        cite=_cite("ced84447", "GLM/GLM5.md", serve=[43, 52], mtp=[46, 47], block=[169, 203]),
        note="the block itself reports the speculative-decoding acceptance",
    ),
    "aba3963a0407": _out(
        "speculative_decoding",
        cite=_cite("0cd27635", "GLM/GLM5.md", block=[176, 210]),
        note="the block itself reports the speculative-decoding acceptance",
    ),
    "8312d102842f": _out("template", cite=_cite("39063567", "Google/Gemma4.md", block=[932, 948])),
    "5803b21dc006": _out(
        "inconsistent",
        cite=_cite(
            "25da2280", "InterVL/InterVL3.md", serve=[25, 32], client=[94, 106], block=[110, 130]
        ),
        note="the client sends --num-prompts 50 of 2048/1024 with --ignore-eos; the block has "
        "497 requests and 62,259 generated tokens (125 per request)",
    ),
    "915f5a1cde7f": _llama_rocm(
        L405,
        "4c19cf7d",
        heading=[270, 270],
        block=[272, 300],
        serve=[115, 136],
        hf_id="amd/Llama-3.1-405B-Instruct-FP8-KV",
        precision="fp8",
        catalog_model=_LLAMA_405B_MODEL,
    ),
    "c558e06fa145": _out(
        "inconsistent",
        cite=_cite("4c19cf7d", L405, heading=[302, 302], block=[304, 332], serve=[138, 160]),
        note="405B MXFP4 'TP1 on MI355': its figures imply about 7,100 prompt tokens/s "
        "(1,048,448 in 147.60 s) of a 405B model on one GPU, about 5.8 PFLOP/s, above the "
        "MI355X's dense FP8 peak (5.0); and the same file labels its FP8 block (B19) TP 1 on "
        "MI355 too, which cannot fit (about 405 GB of weights on 288 GB): the file's labels "
        "cannot be trusted for this block",
    ),
    "fe2bda4b6b1c": _llama_rocm(
        L70,
        "584c0c64",
        heading=[268, 268],
        block=[270, 298],
        serve=[115, 135],
        hf_id="amd/Llama-3.3-70B-Instruct-FP8-KV",
        precision="fp8",
        catalog_model=_LLAMA_70B_MODEL,
    ),
    "18156bae350d": _llama_rocm(
        L70,
        "584c0c64",
        heading=[301, 301],
        block=[303, 331],
        serve=[137, 158],
        hf_id="amd/Llama-3.3-70B-Instruct-MXFP4-Preview",
        precision="mxfp4",
        catalog_model=_LLAMA_70B_MODEL,
    ),
    "7da196fa1416": _out(
        "template", cite=_cite("c8783b99", "Llama/Llama3.3-70B.md", block=[249, 273])
    ),
    "aac520d8ee06": _out(
        "template", cite=_cite("96831afa", "MiniMax/MiniMax-M2.5.md", block=[71, 95])
    ),
    "dc1a7ef022e3": _out(
        "gpu_not_in_catalog",
        "no_config",
        cite=_cite(
            "c147d3a2", "MiniMax/MiniMax-M2.md", gpu=[74, 74], serve=[25, 31], client=[61, 71]
        ),
        note="first seen at 9efd0926 (GPU '4x H200/H20 or 4x A100/A800'); from c147d3a2 the "
        "block is '(TP 4 on NVIDIA_H20-3e *4)': the H20 with 141 GB of HBM3e, which the catalog "
        "lacks (its h20 is the 96 GB card)",
    ),
    "adaf9b1a3923": _out(
        "multi_node",
        cite=_cite(
            "1f495909",
            "Moonshotai/Kimi-K2.md",
            gpu=[17, 19],
            serve=[25, 31],
            client=[60, 71],
            block=[84, 105],
        ),
        note="16 x H800 on two nodes, --tensor-parallel-size 8 --pipeline-parallel-size 2",
    ),
    "871a7047e093": _out(
        "template", cite=_cite("afac5f7a", "NVIDIA/Nemotron-3-Nano-30B-A3B.md", block=[135, 158])
    ),
    "5a614e8a8e04": _out(
        "architecture",
        cite=_cite(
            "5edc8021",
            "NVIDIA/Nemotron-3-Nano-30B-A3B.md",
            version=[7, 16],
            serve=[42, 67],
            client=[102, 117],
            gpu=[132, 132],
            block=[135, 159],
        ),
        note="Nemotron-3-Nano on 1 x H200, vLLM v0.12.0: a hybrid of Mamba-2 layers, attention "
        "and MoE (a mamba-ssm-cache-dtype line); itlkit's Model has no state-space layers",
    ),
    "41653dba3e60": _out(
        "no_config",
        cite=_cite(
            "e3200d0a",
            "OpenGVLab/InternVL3.md",
            gpu=[20, 20],
            serve=[23, 30],
            client=[89, 101],
            block=[105, 126],
        ),
        note="InternVL3-8B-hf on 2 x A100-SXM4-40GB, TP 2, --enforce-eager: no citable copy of "
        "its config.json was found",
    ),
    "f7e3eb651a4c": _out(
        "no_config",
        cite=_cite(
            "a2dd5a58",
            "OpenGVLab/InternVL3.md",
            gpu=[20, 20],
            serve=[23, 30],
            client=[90, 111],
            block=[115, 136],
        ),
        note="random-mm with 0 images per request (text only), --enforce-eager in this version "
        "(4db9e321 drops it and keeps the block): no citable copy of the config was found",
    ),
    "04ed5c3f46d2": _out(
        "multimodal_dataset",
        cite=_cite("4db9e321", "OpenGVLab/InternVL3.md", client=[141, 153], block=[157, 177]),
    ),
    "ff45932e20ec": _out(
        "no_config",
        cite=_cite("335e3bf5", QVL, gpu=[15, 15], serve=[21, 29], client=[44, 54], block=[71, 91]),
        note="Qwen2.5-VL-72B on 4 x A100, TP 4: no citable copy of its config.json (or a "
        "module print with its shapes) was found to check it against the catalog's qwen2.5-72b",
    ),
    # Qwen2.5-VL-7B, "all configurations remain the same except for model name": TP 4, 4 A100.
    "b62ddeec5c0b": {
        "status": "kept",
        "cite": _cite(
            "335e3bf5",
            QVL,
            gpu=[15, 15],
            a100_80gb=[31, 31],
            serve=[21, 29],
            same_config_7b=[35, 35],
            prefix_cache=[38, 40],
            client=[44, 54],
            heading=[95, 95],
            block=[99, 119],
        ),
        "run": {
            "model": {
                "hf_id": "Qwen/Qwen2.5-VL-7B-Instruct",
                "catalog": "qwen2.5-7b",
                "check": "the language model of a Qwen2.5-VL module print "
                "(acproject/duorou @ 0362c275e841b3ce549a941db4a8f776d60266bd "
                "docs/qwen2.5vl_graph.md: Embedding(152064, 3584), 28 decoder layers, q_proj "
                "3584->3584 with bias, k/v_proj 3584->512 with bias, MLP 18944, untied lm_head) "
                "has the catalog's qwen2.5-7b shape (28 layers, hidden 3584, 28/4 heads of 128, "
                "intermediate 18944, vocab 152064, qkv bias). The vision tower (32 blocks) does "
                "not run for text prompts",
                "max_position_embeddings": 128000,
                "max_position_embeddings_source": "xorbitsai/inference @ "
                "530b0785eefe1556578501469a88cfe961a17069 "
                "doc/source/models/builtin/llm/qwen2.5-vl-instruct.rst ('Context Length: "
                "128000'); it only bounds requests here (V1 chunks prompts by its budget)",
            },
            "gpu": {
                "name_in_file": "A100 (A100-80GB)",
                "itlkit": "a100-80gb-sxm",
                "count": 4,
                "why": "'on 4xA100' and 'TP should be larger than 2 for A100-80GB devices'; "
                "SXM or PCIe is not written (SXM taken, flag a100_form_factor_assumed)",
            },
            "tp": 4,
            "weights_precision": "bf16",
            "kv_cache_dtype": None,
            "image": "uv pip install -U vllm",
            "vllm_version": "0.10.1",
            "vllm_version_source": "release current at the commit date (2025-08-19T06:46Z): "
            "'uv pip install -U vllm' installs the newest release, 0.10.1 (on PyPI from "
            "2025-08-19T02:18Z)",
            "engine": {
                "max_model_len": None,
                "max_num_seqs": None,
                "max_num_batched_tokens": None,
                "block_size": None,
                "gpu_memory_utilization": None,
                "prefix_caching": False,
                "prefix_caching_source": "'For benchmarking, disable prefix caching by "
                "adding --no-enable-prefix-caching to the server command.'",
                "chunked_prefill": None,
            },
            "client": {
                "dataset": "random",
                "input_len": 8000,
                "output_len": 1000,
                "num_prompts": 16,
                "max_concurrency": None,
                "request_rate": None,
                "ignore_eos": True,
                "range_ratio": None,
            },
            "table": "qvl",
        },
    },
    "d12d5c927b74": _out(
        "multimodal_dataset", cite=_cite("a2f3de82", QVL, client=[63, 74], block=[81, 101])
    ),
    "bafedbdfff58": _out(
        "no_config",
        cite=_cite(
            "a2f3de82", QVL, gpu=[15, 15], serve=[21, 33], client=[109, 118], block=[130, 150]
        ),
        note="Qwen2.5-VL-72B on 4 x A100, TP 4, 128 prompts of 8000/1000 without --ignore-eos: "
        "no citable copy of its config was found",
    ),
    "2ced1648f709": _out(
        "multimodal_dataset", cite=_cite("a2f3de82", QVL, client=[159, 170], block=[175, 195])
    ),
    "bf104e71dede": _out(
        "expert_or_data_parallel",
        cite=_cite("a2f3de82", QVL, serve=[43, 53], client=[202, 211], block=[216, 236]),
        note="the 7B server runs --data-parallel-size 4 (the client also names the 72B model)",
    ),
    "8426fef3eb65": _out(
        "expert_or_data_parallel",
        cite=_cite(
            "b0ae4f77",
            "Qwen/Qwen3-Coder-480B-A35B.md",
            gpu=[15, 15],
            serve=[29, 35],
            client=[52, 62],
            block=[66, 86],
        ),
        note="the FP8 model benchmarked is served with --enable-expert-parallel "
        "--data-parallel-size 8, on '8xH200 (or H20)'",
    ),
    "a6443f695739": _out(
        "gpu_not_stated",
        "architecture",
        cite=_cite(
            "9b4394e9",
            "Qwen/Qwen3-Next.md",
            gpu=[16, 16],
            serve=[20, 25],
            client=[46, 56],
            block=[60, 81],
        ),
        note="'You can use 4x H200/H20 or 4x A100/A800 GPUs': which ran is not said. Qwen3-Next "
        "mixes gated linear attention (Gated DeltaNet) with full attention",
    ),
    "d411ed671d45": _out(
        "architecture",
        cite=_cite("1bc2b47b", "Qwen/Qwen3-Next.md", arch=[5, 8], serve=[64, 67], block=[71, 92]),
        note="4 x B200, TP 4; Qwen3-Next's hybrid attention (3 of 4 layers Gated DeltaNet "
        "linear attention) is not in itlkit's Model",
    ),
    "c908c546ac7b": _out(
        "speculative_decoding",
        cite=_cite("1bc2b47b", "Qwen/Qwen3-Next.md", serve=[97, 100], block=[104, 125]),
    ),
    "0c81c06ea387": _out(
        "speculative_decoding",
        cite=_cite("fb40f85f", "Qwen/Qwen3-Next.md", serve=[97, 100], block=[104, 125]),
    ),
    "1270753e3d87": _out(
        "no_config",
        cite=_cite(
            "56a5c020",
            "Seed/Seed-OSS-36B.md",
            serve=[27, 34],
            gpu=[156, 156],
            client=[158, 170],
            block=[175, 196],
        ),
        note="Seed-OSS-36B-Instruct 'on RTX 3090 GPU' (count not written; the serve command "
        "is TP 8 and serves the Base checkpoint): no citable copy of its config.json was found",
    ),
    "bf07464e61cc": _out(
        "architecture",
        "no_config",
        cite=_cite(
            "ce18608b",
            "StepFun/Step-3.5-Flash.md",
            arch=[5, 7],
            serve=[57, 67],
            client=[104, 114],
            gpu=[116, 116],
            block=[120, 144],
        ),
        note="TP 4 on 4 x H200, BF16; Step-3.5-Flash interleaves sliding-window layers whose "
        "head count differs from the full-attention layers', which itlkit's Model (one head "
        "shape for every layer) cannot express, and no copy of its config.json was found",
    ),
    "3ce4ebef1e3e": _out(
        "no_config",
        cite=_cite(
            "9f929274",
            "models/mistralai/Ministral-3-14B-Instruct-2512.yaml",
            serve=[176, 195],
            client=[236, 239],
            block=[262, 286],
        ),
        note="Ministral-3-14B (FP8) on 1 x MI300X, TP 1, random 1024/1024 at concurrency 32: no "
        "citable copy of its config.json was found",
    ),
    "d06df3c4123f": _out(
        "gpu_not_in_catalog",
        cite=_cite(
            "eb076ec1",
            "models/tencent/Hy3-preview.yaml",
            gpu=[214, 214],
            client=[216, 225],
            block=[230, 254],
        ),
        note="8 x H20-3e (141 GB), not in the catalog; the serve command of the run (TP, MTP) "
        "is not given either",
    ),
    "2fc8857853ea": _out(
        "speculative_decoding",
        "gpu_not_in_catalog",
        cite=_cite("b41b0cc7", "models/tencent/Hy3.yaml", block=[354, 371], heading=[350, 351]),
        note="'Hy3-FP8, TP4 on 4xGB300 (one NVL4 tray), trtllm all-reduce, MTP=2'",
    ),
    "94289473c94f": _out(
        "no_config",
        cite=_cite(
            "1fa97625",
            "moonshotai/Kimi-K2-Think.md",
            serve=[29, 36],
            gpu=[65, 65],
            client=[67, 76],
            block=[81, 105],
        ),
        note="Kimi-K2-Thinking (INT4 experts) on 8 x H200, TP 8: its config (kimi_k2: 384 "
        "experts, 64 heads, 1 dense layer) is not the catalog's deepseek-v3 and no citable copy "
        "of it was found",
    ),
    "2d7747c874f3": _out(
        "decode_context_parallel",
        cite=_cite("1fa97625", "moonshotai/Kimi-K2-Think.md", serve=[114, 123], block=[167, 191]),
    ),
    "9b2f535dc2b9": _out(
        "client_not_stated",
        cite=_cite(
            "abb28a03", "moonshotai/Kimi-K2.5.md", serve=[79, 86], note=[109, 109], block=[114, 149]
        ),
        note="figures 'sourced from SemiAnalysis InferenceX' (8 x B200, TP 8, vLLM 0.17.0, ISL "
        "= OSL = 1024, concurrency 4); the prompt count, dataset and length spread are not in the "
        "file. InferenceX is already a source of this project",
    ),
    "193be3fc2bca": _out(
        "expert_or_data_parallel",
        "client_not_stated",
        cite=_cite("abb28a03", "moonshotai/Kimi-K2.5.md", serve=[95, 103], block=[155, 190]),
    ),
    "ea892224c021": _out(
        "client_not_stated",
        cite=_cite(
            "7635051c", "moonshotai/Kimi-K2.5.md", serve=[79, 86], note=[108, 112], block=[115, 147]
        ),
        note="InferenceX run 23669977901 (8 x B200, TP 8, vLLM 0.17.0, NVFP4, concurrency 4): "
        "the client's command is InferenceX's, not written in the file",
    ),
    "4220a2cd0420": _out(
        "client_not_stated",
        cite=_cite(
            "7635051c",
            "moonshotai/Kimi-K2.5.md",
            serve=[95, 102],
            note=[152, 152],
            block=[155, 187],
        ),
        note="its TTFT, TPOT, ITL and E2E figures are the ones abb28a03 labelled 'TP4, EP4'",
    ),
    "e35e5dae104a": _out(
        "multi_node",
        cite=_cite(
            "a2d31f03", "moonshotai/Kimi-K2.md", gpu=[107, 107], client=[109, 119], block=[124, 144]
        ),
        note="16 x H200 (two 8-GPU nodes); the file's only TP command is TP 8 x PP 2 over two "
        "nodes",
    ),
    "bf1d653ec433": _out(
        "decode_context_parallel",
        "multi_node",
        cite=_cite(
            "e97ccbcd", "moonshotai/Kimi-K2.md", serve=[25, 31], note=[147, 147], block=[150, 173]
        ),
    ),
}

# Results in the history that are not "Serving Benchmark Result" blocks (so not runs here).
NOT_BLOCKS = (
    {
        "commit": "1bcf150aa0966a473e1c2130ca9e29d06c743751",
        "path": "moonshotai/Kimi-K2.5.md",
        "lines": [107, 126],
        "what": "a table of mean TTFT / TPOT / ITL per ISL, OSL and "
        "concurrency for nvidia/Kimi-K2.5-NVFP4 on 8 x B200, 'sourced from SemiAnalysis "
        "InferenceX': no request counts, durations or client commands",
    },
)


# ---- reading the mirror -------------------------------------------------------------------------
def git(mirror: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-C", str(mirror), *args], input=data, capture_output=True, check=True
    ).stdout


def commits(mirror: Path) -> list[tuple[int, str]]:
    """(committer time, commit) of every commit reachable from any ref."""
    out = git(mirror, "log", "--all", "--format=%ct %H").decode().split()
    return sorted((int(t), c) for t, c in zip(out[::2], out[1::2], strict=True))


def text_blobs(mirror: Path, all_commits) -> dict[str, list[tuple[int, str, str]]]:
    """blob -> [(committer time, commit, path)] for every text file version."""
    where = collections.defaultdict(list)
    for time, commit in all_commits:
        for line in git(mirror, "ls-tree", "-r", commit).decode().splitlines():
            meta, path = line.split("\t", 1)
            _, kind, blob = meta.split()
            if kind == "blob" and path.endswith(TEXT_SUFFIXES):
                where[blob].append((time, commit, path))
    return where


def read_blobs(mirror: Path, blobs: list[str]) -> dict[str, str]:
    out = git(mirror, "cat-file", "--batch", data=("\n".join(blobs) + "\n").encode())
    texts, at = {}, 0
    for blob in blobs:
        newline = out.index(b"\n", at)
        size = int(out[at:newline].split()[2])
        texts[blob] = out[newline + 1 : newline + 1 + size].decode("utf-8", "replace")
        at = newline + 1 + size + 1
    return texts


def blocks_in(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, normalised text) of each result block (1-based lines)."""
    lines, found, i = text.split("\n"), [], 0
    while i < len(lines):
        if not HEADER.match(lines[i]):
            i += 1
            continue
        j = i + 1
        while (
            j < len(lines) and not RULE.match(lines[j]) and not lines[j].strip().startswith("```")
        ):
            j += 1
        j = min(j, len(lines) - 1)
        found.append((i + 1, j + 1, "\n".join(line.strip() for line in lines[i : j + 1])))
        i = j + 1
    return found


def fences(text: str) -> list[tuple[int, int]]:
    """(first, last) 1-based lines of each ``` code fence, fences included."""
    spans, start = [], None
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith("```"):
            if start is None:
                start = n
            else:
                spans.append((start, n))
                start = None
    return spans


def quote(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first - 1 : last])


def nearby_commands(text: str, block_first: int) -> dict:
    """The serve-command fences of the file and the last client fence before the block."""
    lines = text.split("\n")
    serve, client = [], None
    for first, last in fences(text):
        body = "\n".join(lines[first - 1 : last])
        if SERVE.search(body):
            serve.append({"lines": [first, last], "text": body})
        if CLIENT.search(body) and last < block_first:
            client = {"lines": [first, last], "text": body}
    return {"serve_fences": serve, "client_fence": client}


# ---- figures --------------------------------------------------------------------------------
def parse_figures(block: str) -> dict:
    """Label -> number (or the text, for a placeholder like 'xxx') of each 'label: value' line."""
    figures = {}
    for line in block.split("\n")[1:]:
        match = FIGURE.match(line)
        if not match:
            continue
        label, value = match.group(1), match.group(2)
        try:
            figures[label] = float(value) if "." in value or "e" in value else int(value)
        except ValueError:
            figures[label] = value
    return figures


# ---- assembling -----------------------------------------------------------------------------
def full_commit(mirror: Path, short: str) -> str:
    return git(mirror, "rev-parse", short).decode().strip()


def committed_utc(mirror: Path, commit: str) -> str:
    out = git(mirror, "log", "-1", "--date=iso-strict", "--format=%cd", commit).decode().strip()
    return out


def cited(mirror: Path, cite: dict) -> dict:
    commit = full_commit(mirror, cite["commit"])
    text = git(mirror, "show", f"{commit}:{cite['path']}").decode("utf-8", "replace")
    return {
        "commit": commit,
        "path": cite["path"],
        "committed": committed_utc(mirror, commit),
        "quotes": {
            role: {"lines": span, "text": quote(text, *span)}
            for role, span in cite["lines"].items()
        },
    }


def transcribe(mirror: Path) -> dict:
    all_commits = commits(mirror)
    where = text_blobs(mirror, all_commits)
    texts = read_blobs(mirror, sorted(where))
    occurrences = collections.defaultdict(list)
    for blob, text in texts.items():
        if "Serving Benchmark Result" not in text:
            continue
        for first, last, block in blocks_in(text):
            for time, commit, path in where[blob]:
                occurrences[block].append((time, commit, path, first, last, blob))
    blocks = []
    for block, seen in occurrences.items():
        seen.sort()
        digest = hashlib.sha256(block.encode()).hexdigest()[:12]
        time, commit, path, first, last, blob = seen[0]
        blocks.append((path, time, first, digest, block, seen))
    blocks.sort()
    out = []
    for number, (_path, _, _first, digest, block, seen) in enumerate(blocks, 1):
        out.append(block_record(mirror, number, digest, block, seen, texts))
    return {
        "format": "itlkit-recipes-transcription/1",
        "description": "Every 'Serving Benchmark Result' block in the history of "
        "vllm-project/recipes (all refs), deduplicated, with its figures, the commands near it, "
        "and the reading that keeps it as a run or leaves it out (transcribe.py's ANNOTATIONS)",
        "source": {
            "repo": "vllm-project/recipes",
            "licence": "Apache-2.0",
            "main_head": full_commit(mirror, "main"),
            "commits_read": len(all_commits),
        },
        "reasons": LEFT_OUT_REASONS,
        "pypi_vllm_releases": [{"version": v, "first_upload": t} for v, t in PYPI_RELEASES],
        "random_dataset_source": {
            "repo": "vllm-project/vllm",
            "commit": "0056b87fc1fda2642f39dda4392824c425dd1638",
            "path": "vllm/benchmarks/datasets.py",
            "what": "RandomDataset: DEFAULT_RANGE_RATIO = 0.0; get_sampling_params draws input "
            "lengths from [floor(L(1 - r)), ceil(L(1 + r))] with L = --random-input-len less the "
            "tokenizer's special tokens, outputs from [floor(O(1 - r)), ceil(O(1 + r))]: without "
            "--random-range-ratio every request has the same lengths",
        },
        "blocks": out,
        "not_blocks": list(NOT_BLOCKS),
    }


def block_record(mirror: Path, number: int, digest: str, block: str, seen, texts) -> dict:
    _, commit, path, first, last, blob = seen[0]
    versions = collections.OrderedDict()
    for _, c, p, f, l, b in seen:  # noqa: E741
        versions.setdefault(
            (p, b), {"path": p, "blob": b, "first_commit": c, "lines": [f, l], "commits": 0}
        )["commits"] += 1
    note = ANNOTATIONS.get(digest)
    if note is None:
        raise SystemExit(f"block {digest} ({path} @ {commit[:8]}) has no annotation")
    record = {
        "id": f"B{number:02d}",
        "hash": digest,
        "first_seen": {
            "commit": commit,
            "committed": committed_utc(mirror, commit),
            "path": path,
            "lines": [first, last],
        },
        "other_versions": [
            v for v in versions.values() if v["first_commit"] != commit or v["path"] != path
        ],
        "commits_with_block": len({c for _, c, *_ in seen}),
        "block": block.split("\n"),
        "figures": parse_figures(block),
        "commands_near_first_seen": nearby_commands(texts[blob], first),
        "status": note["status"],
    }
    if note["status"] == "left_out":
        record["reasons"] = [{"key": k, "why": LEFT_OUT_REASONS[k]} for k in note["reasons"]]
        if note.get("note"):
            record["note"] = note["note"]
    record["cited"] = cited(mirror, note["cite"])
    if note["status"] == "kept":
        record["run"] = note["run"]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirror", nargs="?", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("-o", "--output", type=Path, default=HERE / "transcribed.json")
    args = parser.parse_args()
    doc = transcribe(args.mirror)
    args.output.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kept = sum(b["status"] == "kept" for b in doc["blocks"])
    print(f"{len(doc['blocks'])} blocks ({kept} kept) -> {args.output}")


if __name__ == "__main__":
    main()
