import json

import numpy as np
import pytest
from _paths import DATA

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.physics.model import check_tensor_parallel
from itlkit.physics.model_catalog import MODELS, get_model
from itlkit.physics.roofline import Deployment
from itlkit.units import PRECISIONS

PUBLISHED = json.loads((DATA / "published_counts.json").read_text())
BF16, FP8 = PRECISIONS["bf16"], PRECISIONS["fp8"]


CONFIGS = sorted(p.name for p in (DATA / "hf_configs").iterdir())


def _matches_published(count: int, slug: str, key: str) -> bool:
    """Exact where the count is published exactly; within the stated rounding otherwise."""
    published = PUBLISHED[slug]
    if "abs_tol_params" in published:
        return count == pytest.approx(published[key], abs=published["abs_tol_params"])
    if "rel_tol" in published:
        return count == pytest.approx(published[key], rel=published["rel_tol"])
    return count == published[key]


def test_every_catalog_model_and_config_has_a_published_count():
    assert set(MODELS) <= set(PUBLISHED)
    assert set(PUBLISHED) == set(MODELS) | set(CONFIGS)


@pytest.mark.parametrize("slug", sorted(MODELS))
def test_parameter_counts_match_published_counts(slug):
    model, published = MODELS[slug], PUBLISHED[slug]
    assert model.total_params == published["total_params"]
    assert model.active_params == published["active_params"]


@pytest.mark.parametrize("slug", sorted(MODELS))
def test_kv_bytes_per_token_match_published_configs(slug):
    model = MODELS[slug]
    assert model.kv_bytes_per_token(BF16) == PUBLISHED[slug]["kv_bytes_per_token_bf16"]
    assert model.kv_bytes_per_token(FP8) == PUBLISHED[slug]["kv_bytes_per_token_bf16"] / 2


def test_llama_8b_bytes_match_the_safetensors_index():
    # metadata.total_size of the official BF16 checkpoint: 16,060,522,496 B.
    assert MODELS["llama-3.1-8b"].total_params * 2 == 16_060_522_496
    # gpt-fast's bandwidth column streams everything but the input embedding: 15.01 GB.
    streamed = MODELS["llama-3.1-8b"].streamed_params(exclude_input_embedding=True)
    assert float(streamed) * 2 == 15_009_849_344


def test_tied_embeddings_are_still_streamed_as_the_lm_head():
    gemma = MODELS["gemma-2-9b"]
    assert float(gemma.streamed_params(exclude_input_embedding=True)) == gemma.total_params


def test_mla_caches_one_latent_per_layer():
    # 61 layers x (512 latent + 64 rope) x 2 B = 70,272 B/token (not 128 heads x 320 x 2 B).
    assert MODELS["deepseek-v3"].kv_bytes_per_token(BF16) == 70_272


def test_mixtral_expected_experts_touched():
    # E(1 - (1 - k/E)^b) with E=8, k=2: 2 at b=1, 7.2 at b=8, ~8 from b=16 (spec, Mixtral note).
    mixtral = MODELS["mixtral-8x7b-v0.1"]
    touched = mixtral.expected_experts_touched(tokens=np.array([1, 8, 16, 64]))
    assert touched[0] == pytest.approx(2.0)
    assert touched[1] == pytest.approx(7.2, abs=0.01)
    assert touched[2] == pytest.approx(8.0, abs=0.1)
    assert float(mixtral.streamed_params(tokens=1)) == mixtral.active_params
    assert float(mixtral.streamed_params(tokens=10**6)) == pytest.approx(mixtral.total_params)


def test_many_small_experts_from_the_routed_expert_count():
    # config.json num_local_experts / n_routed_experts / num_experts: Mixtral 8, gpt-oss-20b 32
    # (coarse); gpt-oss-120b and Qwen3-30B-A3B 128, DeepSeek-V3 256 (many small experts)
    coarse = ("mixtral-8x7b-v0.1", "gpt-oss-20b", "llama-3.1-8b")
    fine = ("gpt-oss-120b", "qwen3-30b-a3b", "deepseek-v3")
    assert [MODELS[m].many_experts for m in coarse + fine] == [False] * 3 + [True] * 3


def test_sliding_window_layers_cap_their_kv():
    gemma = MODELS["gemma-2-9b"]  # 21 sliding (4,096) + 21 global layers
    per_layer_token = 2 * 8 * 256 * 2
    at_8k = gemma.kv_bytes(BF16, context_tokens=8192)
    assert at_8k == per_layer_token * (21 * 8192 + 21 * 4096)
    assert gemma.kv_bytes(BF16, context_tokens=1000) == gemma.kv_bytes_per_token(BF16) * 1000


@pytest.mark.parametrize("slug", CONFIGS)
def test_hugging_face_config_gives_the_published_counts(slug):
    model = get_model(DATA / "hf_configs" / slug / "config.json")
    assert model.slug == slug
    assert _matches_published(model.total_params, slug, "total_params")
    assert _matches_published(model.active_params, slug, "active_params")
    assert model.kv_bytes_per_token(BF16) == PUBLISHED[slug]["kv_bytes_per_token_bf16"]
    if slug in MODELS:
        assert model.sliding_layers == MODELS[slug].sliding_layers


@pytest.mark.parametrize("slug", sorted(set(PUBLISHED) - set(MODELS)))
def test_config_only_counts_cite_their_sources(slug):
    assert PUBLISHED[slug]["count_checks"]
    assert all(url.startswith("https://") for url in PUBLISHED[slug]["sources"])


def test_bad_config_files_name_the_file_and_field(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(ConfigError, match=r"empty.json: empty file \(0 bytes\)"):
        get_model(empty)
    broken = tmp_path / "broken.json"
    broken.write_text('{"num_hidden_layers": 2,\n "hidden_size": }')
    with pytest.raises(ConfigError, match=r"broken.json:2: not valid JSON \(column 17: Expect"):
        get_model(broken)
    missing = tmp_path / "config.json"
    missing.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64}))
    with pytest.raises(ConfigError, match="'num_attention_heads' is missing"):
        get_model(missing)
    with pytest.raises(ConfigError, match=r"nope\.json: no such model config\.json file"):
        get_model(tmp_path / "nope.json")
    (tmp_path / "model").mkdir()  # a downloaded model's folder is read through its config.json
    (tmp_path / "model" / "config.json").write_text(missing.read_text())
    with pytest.raises(ConfigError, match=r"model/config\.json.*'num_attention_heads'"):
        get_model(tmp_path / "model")


def test_an_empty_model_name_is_unknown_not_the_current_folder():
    with pytest.raises(UnknownNameError, match="unknown model ''; valid models: llama-3.1-8b"):
        get_model("")


def test_unknown_model_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid models: llama-3.1-8b, llama-3.1-70b"):
        get_model("llama-9")


def test_tensor_parallel_must_divide_heads():
    llama = MODELS["llama-3.1-8b"]
    check_tensor_parallel(llama, tp=8)
    check_tensor_parallel(llama, tp=16)  # 16 = 2 x 8 KV heads: each head replicated
    with pytest.raises(ConfigError, match="TP=3 does not divide the 32 attention heads"):
        check_tensor_parallel(llama, tp=3)
    qwen = MODELS["qwen2.5-7b"]  # 28 query heads, 4 KV heads
    with pytest.raises(ConfigError, match="TP=14 does not divide the 4 KV heads"):
        check_tensor_parallel(qwen, tp=14)
    for bad in (0, -2, 1.5):
        with pytest.raises(ConfigError, match="positive integer"):
            check_tensor_parallel(llama, tp=bad)


def test_tp_beyond_the_kv_heads_replicates_a_whole_head_on_every_gpu():
    # Llama 3.1 70B: 80 layers, 8 KV heads of 128 (its config.json). At TP 16 each GPU holds one
    # whole KV head, not half of one: vLLM's ModelConfig.get_num_kv_heads returns
    # max(1, total_num_kv_heads // tensor_parallel_size) "so each GPU has at least one KV head".
    llama = MODELS["llama-3.1-70b"]
    layers, kv_heads, head_dim = 80, 8, 128
    assert (llama.num_layers, llama.num_kv_heads, llama.head_dim) == (layers, kv_heads, head_dim)
    per_gpu_bf16 = 2 * layers * 1 * head_dim * 2  # K and V x layers x 1 head x head_dim x 2 B
    assert per_gpu_bf16 == 40_960
    assert llama.kv_heads_per_gpu(tp=16) == 1
    dep = Deployment.create(model=llama, gpu="h100-sxm", tp=16)
    assert dep.kv_bytes_per_token_per_gpu == per_gpu_bf16  # a split would give 20,480
    assert dep.kv_bytes_per_sequence_per_gpu(context_tokens=4096) == per_gpu_bf16 * 4096
    # the same as at TP 8 (one head each), an eighth of the whole model's 327,680 B per token
    tp8 = Deployment.create(model=llama, gpu="h100-sxm", tp=8)
    assert tp8.kv_bytes_per_token_per_gpu == per_gpu_bf16
    assert llama.kv_bytes_per_token(BF16) == 8 * per_gpu_bf16
