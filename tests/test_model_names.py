"""physics.model_names and `itlkit diagnose`: the deployment read off the page, assumptions said.

The served names are real ones: the two pages of data/real-pages (a local path and a
neuralmagic FP8 checkpoint) and Hugging Face ids as vLLM users serve them.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from _paths import REAL_PAGES

from itlkit.cli import main
from itlkit.physics.model_names import guess_model

REAL = REAL_PAGES


@pytest.mark.parametrize(
    ("served", "slug", "precision"),
    [
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8"),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", "llama-3.1-70b", "fp8"),
        ("/home/data/models/Meta-Llama-3-8B-Instruct", "llama-3.1-8b", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3", None),
        ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "qwen2.5-72b", "int4"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2.5-7b", "int4"),
        ("amd/Llama-3.3-70B-Instruct-MXFP4-Preview", "llama-3.3-70b", "fp4"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b", "fp4"),
        ("google/gemma-2-9b-it", "gemma-2-9b", None),
        ("zai-org/GLM-4.5-FP8", "glm-4.5", "fp8"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "fp8"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b", None),
    ],
)
def test_served_names_map_to_the_catalog(served, slug, precision):
    guess = guess_model(served)
    assert (guess.slug, guess.weight_precision) == (slug, precision)
    assert served in guess.reason


@pytest.mark.parametrize("served", ["", "my-finetune", "facebook/opt-125m", "llama-3.1-8b-x-z"])
def test_names_outside_the_catalog_are_not_guessed(served):
    assert guess_model(served) is None


def _diagnose_json(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["diagnose", *args, "--json"]) == 0
    return json.loads(out.getvalue())


def test_fp8_page_is_diagnosed_as_fp8_and_the_gpu_is_an_assumption():
    doc = _diagnose_json(str(REAL / "kubeai-llama31-8b-fp8-v0.5" / "metrics.prom"))
    assert doc["model"] == "llama-3.1-8b"
    assumptions = " | ".join(doc["assumptions"])
    assert "FP8 weights from its suffix" in assumptions
    # the GPU is an assumption, narrowed by the page's KV cache size (tests/test_gpu_from_kv.py)
    assert "GPU one of l4, " in assumptions and "(pass --gpu)" in assumptions
    # FP8 weights: 8.03e9 params x 1 B -> the floor is below BF16's 16.06 GB, on the same GPU
    page = str(REAL / "kubeai-llama31-8b-fp8-v0.5" / "metrics.prom")
    fp8 = _diagnose_json(page, "--gpu", "l4")
    bf16 = _diagnose_json(page, "--gpu", "l4", "--weights-precision", "bf16")
    assert fp8["floor_seconds"] < bf16["floor_seconds"]


def test_given_values_are_not_assumptions():
    page = str(REAL / "francetravail-llama3-8b-v0.4" / "metrics.prom")
    given = ("--model", "llama-3.1-8b", "--gpu", "l4", "--weights-precision", "bf16", "--tp", "1",
             "--kv-precision", "bf16")  # fmt: skip
    doc = _diagnose_json(page, *given)
    assert doc["assumptions"] == []
    assert doc["gpu"] == "l4"


def _two_model_page(tmp_path):
    text = (REAL / "kubeai-llama31-8b-fp8-v0.5" / "metrics.prom").read_text()
    served = "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"
    other = "\n".join(
        line.replace(served, "Qwen/Qwen2.5-7B-Instruct")
        for line in text.splitlines()
        if line.startswith("vllm:") and served in line
    )
    page = tmp_path / "two.prom"
    page.write_text(text + other + "\n")
    return page


def test_two_served_models_need_a_choice(tmp_path):
    page = _two_model_page(tmp_path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["diagnose", str(page)]) == 2
    assert "the metrics hold 2 models" in err.getvalue() and "--model-name" in err.getvalue()
    qwen = _diagnose_json(str(page), "--model-name", "Qwen/Qwen2.5-7B-Instruct")
    assert qwen["model"] == "qwen2.5-7b"
    alone = _diagnose_json(str(REAL / "kubeai-llama31-8b-fp8-v0.5" / "metrics.prom"))
    assert qwen["itl"]["count"] == alone["itl"]["count"]  # the copy, not the sum of both


def test_a_served_name_given_as_model_is_read_and_said():
    page = str(REAL / "francetravail-llama3-8b-v0.4" / "metrics.prom")
    doc = _diagnose_json(page, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l4")
    assert doc["model"] == "llama-3.1-8b"
    said = "--model 'meta-llama/Llama-3.1-8B-Instruct' read as the catalog's llama-3.1-8b"
    assert doc["assumptions"][0] == f"{said}, the architecture its name gives"
