"""Hostile and unusual config.json files: each bad field is refused in one line naming it."""

import json

import pytest
from _paths import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from itlkit.errors import ConfigError
from itlkit.physics.model_catalog import get_model
from itlkit.units import PRECISIONS

LLAMA = json.loads((DATA / "hf_configs" / "llama-3.1-8b" / "config.json").read_text())
BF16 = PRECISIONS["bf16"]
MIXTRAL = json.loads((DATA / "hf_configs" / "mixtral-8x7b-v0.1" / "config.json").read_text())


def _read(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return get_model(path)


POSITIVE_INTEGER_FIELDS = [
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
]


@pytest.mark.parametrize("field", POSITIVE_INTEGER_FIELDS)
@pytest.mark.parametrize("bad", [0, -8, True, "128", 127.5, [128], {"v": 1}])
def test_integer_fields_refuse_zero_negatives_bools_strings_and_fractions(tmp_path, field, bad):
    with pytest.raises(
        ConfigError, match=rf"config.json: field '{field}' must be an integer from 1"
    ):
        _read(tmp_path, {**LLAMA, field: bad})


def test_integral_floats_and_nulls_read_as_integers_and_absent(tmp_path):
    model = _read(tmp_path, {**LLAMA, "hidden_size": 4096.0, "head_dim": None})
    assert model.hidden_size == 4096 and model.attention_head_dim == 128
    assert model.total_params == 8_030_261_248


def test_zero_kv_heads_is_refused_not_read_as_every_head(tmp_path):
    # Before: `int(0 or heads)` silently made 32 KV heads (4x the KV bytes).
    with pytest.raises(
        ConfigError, match="'num_key_value_heads' must be an integer from 1 to 100,000,000"
    ):
        _read(tmp_path, {**LLAMA, "num_key_value_heads": 0})


def test_kv_heads_must_divide_query_heads(tmp_path):
    with pytest.raises(ConfigError, match=r"'num_key_value_heads' \(5\) must divide .* \(32\)"):
        _read(tmp_path, {**LLAMA, "num_key_value_heads": 5})


def test_heads_must_divide_hidden_without_head_dim(tmp_path):
    config = {**LLAMA, "num_attention_heads": 24, "num_key_value_heads": 8, "hidden_size": 4100}
    with pytest.raises(ConfigError, match="'num_attention_heads' .* must divide hidden_size"):
        _read(tmp_path, config)


@pytest.mark.parametrize("bad", ["false", "true", 0, 1, "yes"])
def test_booleans_must_be_json_booleans(tmp_path, bad):
    # The string "false" is truthy: before, it tied the embeddings and dropped 0.5 B parameters.
    with pytest.raises(ConfigError, match="'tie_word_embeddings' must be true or false"):
        _read(tmp_path, {**LLAMA, "tie_word_embeddings": bad})


@pytest.mark.parametrize("field", ["attention_bias", "mlp_bias"])
def test_other_booleans_must_be_json_booleans(tmp_path, field):
    with pytest.raises(ConfigError, match=f"'{field}' must be true or false"):
        _read(tmp_path, {**LLAMA, field: "false"})


def test_top_k_cannot_exceed_the_experts(tmp_path):
    with pytest.raises(ConfigError, match=r"'num_experts_per_tok' \(16\) exceeds the 8 experts"):
        _read(tmp_path, {**MIXTRAL, "num_experts_per_tok": 16})


@pytest.mark.parametrize("bad", [-8, "8", 8.5, True])
def test_expert_count_must_be_a_non_negative_integer(tmp_path, bad):
    with pytest.raises(
        ConfigError, match="'num_local_experts' must be an integer from 0 to 100,000,000"
    ):
        _read(tmp_path, {**MIXTRAL, "num_local_experts": bad})


@pytest.mark.parametrize("bad", [0, -1, "2"])
def test_top_k_must_be_positive(tmp_path, bad):
    with pytest.raises(
        ConfigError, match="'num_experts_per_tok' must be an integer from 1 to 100,000,000"
    ):
        _read(tmp_path, {**MIXTRAL, "num_experts_per_tok": bad})


def test_moe_without_top_k_is_refused(tmp_path):
    config = {k: v for k, v in MIXTRAL.items() if k != "num_experts_per_tok"}
    with pytest.raises(ConfigError, match="'num_experts_per_tok' is missing"):
        _read(tmp_path, config)


@pytest.mark.parametrize("bad", [-4096, "4096", 4096.5])
def test_sliding_window_must_be_a_non_negative_integer(tmp_path, bad):
    # Before: -4096 gave negative KV bytes.
    with pytest.raises(
        ConfigError, match="'sliding_window' must be an integer from 0 to 100,000,000"
    ):
        _read(tmp_path, {**LLAMA, "sliding_window": bad})


def test_sliding_window_zero_means_no_window(tmp_path):
    assert _read(tmp_path, {**LLAMA, "sliding_window": 0}).sliding_layers == 0


def test_layer_types_must_list_one_string_per_layer(tmp_path):
    config = {**LLAMA, "sliding_window": 4096, "layer_types": ["sliding_attention"] * 3}
    with pytest.raises(ConfigError, match=r"'layer_types' must list one string per layer \(32\)"):
        _read(tmp_path, config)
    config["layer_types"] = "sliding_attention"
    with pytest.raises(ConfigError, match="'layer_types' must be a list"):
        _read(tmp_path, config)


def test_mla_fields_are_checked(tmp_path):
    config = json.loads((DATA / "hf_configs" / "deepseek-v3" / "config.json").read_text())
    with pytest.raises(
        ConfigError, match="'qk_rope_head_dim' must be an integer from 1 to 100,000,000"
    ):
        _read(tmp_path, {**config, "qk_rope_head_dim": -64})
    with pytest.raises(ConfigError, match="'first_k_dense_replace' exceeds num_hidden_layers"):
        _read(tmp_path, {**config, "first_k_dense_replace": 62})
    with pytest.raises(
        ConfigError, match="'n_shared_experts' must be an integer from 0 to 100,000,000"
    ):
        _read(tmp_path, {**config, "n_shared_experts": "1"})


def test_model_type_and_text_config_must_have_the_right_shape(tmp_path):
    with pytest.raises(ConfigError, match="'model_type' must be a string"):
        _read(tmp_path, {**LLAMA, "model_type": 7})
    with pytest.raises(ConfigError, match="'text_config' must be a JSON object"):
        _read(tmp_path, {"model_type": "llama4", "text_config": "none"})


# ---- families read by their own field names ----------------------------------------------------
def _config(slug):
    return get_model(DATA / "hf_configs" / slug / "config.json")


def _raw(slug):
    return json.loads((DATA / "hf_configs" / slug / "config.json").read_text())


def test_gpt2_learned_positions_layernorm_biases_and_a_tied_head():
    gpt2 = _config("gpt2")
    assert gpt2.position_embedding_params == 1024 * 768
    assert gpt2.lm_head_params == 0
    assert gpt2.norm_params == 2 * 768  # LayerNorm weight and bias
    assert gpt2.dense_mlp_params_per_layer == 2 * 768 * 3072 + 3072 + 768  # c_fc, c_proj + biases
    assert gpt2.attention_params_per_layer == 4 * 768 * 768 + 4 * 768  # c_attn, c_proj + biases
    # Token table is the tied head (streamed); the position table is a gather.
    streamed = float(gpt2.streamed_params(exclude_input_embedding=True))
    assert streamed == 124_439_808 - 786_432


def test_opt_positions_have_an_offset_of_two_and_350m_projects_its_embeddings():
    assert _config("opt-125m").position_embedding_params == (2048 + 2) * 768
    opt350 = _config("opt-350m")
    assert opt350.embedding_params == 50272 * 512
    assert opt350.embedding_projection_params == 2 * 512 * 1024
    assert not opt350.final_norm  # do_layer_norm_before: false


def test_gpt_j_has_one_norm_per_block_and_a_biased_head():
    gptj = _config("gpt-j-6b")
    assert gptj.norms_per_layer == 1
    assert gptj.lm_head_params == 50400 * 4096 + 50400


def test_falcon_7b_is_multi_query_with_one_parallel_norm():
    falcon = _config("falcon-7b")
    assert (falcon.num_kv_heads, falcon.norms_per_layer) == (1, 1)
    assert falcon.kv_bytes_per_token(BF16) == 32 * 2 * 64 * 2


def test_llama_4_scout_has_a_shared_expert_and_dense_width_for_dense_layers():
    scout, maverick = _config("llama-4-scout-17b-16e"), _config("llama-4-maverick-17b-128e")
    assert scout.moe_layers == 48 and maverick.moe_layers == 24  # interleave_moe_layer_step 1, 2
    assert scout.shared_experts_params_per_layer == 3 * 5120 * 8192
    assert maverick.dense_mlp_params_per_layer == 3 * 5120 * 16384  # intermediate_size_mlp
    # Without the shared expert the reader gave 101.7 B / 11.1 B.
    assert scout.total_params - 48 * scout.shared_experts_params_per_layer == pytest.approx(
        101.7e9, abs=0.05e9
    )
    # 3 of 4 layers attend within an 8,192-token chunk.
    assert (scout.sliding_layers, scout.sliding_window) == (36, 8192)


def test_gemma_3_keeps_one_global_layer_in_six():
    gemma = _config("gemma-3-1b")
    assert (gemma.sliding_layers, gemma.sliding_window) == (22, 512)
    assert gemma.qk_norm and gemma.tie_word_embeddings


def test_qwen2_moe_shared_expert_has_its_own_width_and_gate():
    qwen = _config("qwen1.5-moe-a2.7b")
    assert qwen.shared_experts_params_per_layer == 3 * 2048 * 5632 + 2048


@pytest.mark.parametrize(
    ("slug", "field", "bad", "message"),
    [
        ("gpt2", "n_embd", "768", "must be an integer from 1 to 100,000,000"),
        ("gpt2", "n_positions", 0, "must be an integer from 1 to 100,000,000"),
        ("opt-125m", "enable_bias", "false", "must be true or false"),
        ("opt-125m", "ffn_dim", -3072, "must be an integer from 1 to 100,000,000"),
        ("falcon-7b", "multi_query", "true", "must be true or false"),
        ("falcon-7b", "num_attention_heads", 71.5, "must be an integer from 1 to 100,000,000"),
        ("pythia-160m", "intermediate_size", None, "is missing"),
        ("gpt-j-6b", "n_inner", 0, "must be an integer from 1 to 100,000,000"),
        (
            "qwen1.5-moe-a2.7b",
            "shared_expert_intermediate_size",
            -1,
            "must be an integer from 0 to 100,000,000",
        ),
        (
            "qwen1.5-moe-a2.7b",
            "mlp_only_layers",
            [3],
            r"\(dense layers listed by index\) is not supported",
        ),
        ("deepseek-v2-lite", "moe_layer_freq", 2, "other than 1 is not supported"),
    ],
)
def test_family_fields_are_checked(tmp_path, slug, field, bad, message):
    with pytest.raises(ConfigError, match=f"config.json: field '{field}' {message}"):
        _read(tmp_path, {**_raw(slug), field: bad})


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("interleave_moe_layer_step", 0, "must be an integer from 1 to 100,000,000"),
        ("interleave_moe_layer_step", 49, "exceeds num_hidden_layers"),
        ("num_experts_per_tok", 17, r"\(17\) exceeds the 16 experts"),
        ("no_rope_layers", [1, 0], r"must list one 0 or 1 per layer \(48\)"),
        ("attention_chunk_size", -8192, "must be an integer from 0 to 100,000,000"),
    ],
)
def test_llama_4_text_config_fields_are_checked(tmp_path, field, bad, message):
    config = _raw("llama-4-scout-17b-16e")
    config["text_config"] = {**config["text_config"], field: bad}
    with pytest.raises(ConfigError, match=f"field '{field}' {message}"):
        _read(tmp_path, config)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS_READ = {
    "llama-3.1-8b": [*POSITIVE_INTEGER_FIELDS, "tie_word_embeddings", "sliding_window"],
    "mixtral-8x7b-v0.1": ["num_local_experts", "num_experts_per_tok", "sliding_window"],
    "deepseek-v3": ["kv_lora_rank", "q_lora_rank", "n_shared_experts", "first_k_dense_replace"],
    "gpt-oss-120b": ["layer_types", "sliding_window", "head_dim"],
    "gpt2": ["n_embd", "n_layer", "n_head", "n_positions", "n_inner", "tie_word_embeddings"],
    "opt-350m": ["word_embed_proj_dim", "do_layer_norm_before", "ffn_dim", "enable_bias"],
    "falcon-7b": ["multi_query", "parallel_attn", "new_decoder_architecture", "bias"],
    "qwen1.5-moe-a2.7b": ["shared_expert_intermediate_size", "decoder_sparse_step"],
    "gemma-3-1b": ["sliding_window_pattern", "sliding_window", "head_dim"],
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from([(slug, f) for slug, fields in FIELDS_READ.items() for f in fields]),
    value=JSON_VALUES,
)
def test_any_json_value_gives_a_model_or_one_config_error(tmp_path_factory, case, value):
    slug, field = case
    path = tmp_path_factory.mktemp("c") / "config.json"
    path.write_text(json.dumps({**_raw(slug), field: value}))
    try:
        model = get_model(path)
    except ConfigError as exc:
        assert str(exc).startswith(f"model config {path}: field ")
        assert "\n" not in str(exc)
        return
    # What was accepted is a buildable architecture: positive sizes, non-negative KV.
    assert model.total_params > 0 and model.active_params > 0
    assert model.num_attention_heads % model.num_kv_heads == 0 or model.is_mla
    assert float(model.kv_bytes(BF16, context_tokens=10_000)) >= 0
    assert model.experts_per_token <= model.num_experts or not model.is_moe


@pytest.mark.parametrize("field", ["hidden_size", "vocab_size", "num_hidden_layers"])
def test_sizes_beyond_any_model_are_refused_before_they_overflow(tmp_path, field):
    # 1e308 is an integral float: read as a size, the parameter count would be inf
    config = json.loads((DATA / "hf_configs" / "llama-3.1-8b" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, field: 1e308}))
    with pytest.raises(
        ConfigError, match=rf"'{field}' must be an integer from 1 to 100,000,000 \(got 1e\+308\)"
    ):
        get_model(path)


# Layers that are not attention over a KV cache (transformers' config classes name them so):
# read as a llama-like model, every one of them would be priced as full attention's KV and FLOPs.
@pytest.mark.parametrize(("extra", "field"), [
    ({"model_type": "qwen3_next", "full_attention_interval": 4}, "full_attention_interval"),
    ({"linear_num_value_heads": 32}, "linear_num_value_heads"),  # Qwen3-Next's Gated DeltaNet
    ({"model_type": "jamba", "attn_layer_period": 8}, "attn_layer_period"),
    ({"mamba_d_state": 16}, "mamba_d_state"),
    ({"hybrid_override_pattern": "M-M-M*-"}, "hybrid_override_pattern"),  # Nemotron-H
    ({"layer_types": ["mamba"] * 31 + ["attention"]}, "layer_types"),  # Granite 4 hybrid
    ({"layer_types": ["linear_attention"] * 24 + ["full_attention"] * 8}, "layer_types"),
])  # fmt: skip
def test_layers_that_are_not_attention_are_refused_by_name(tmp_path, extra, field):
    with pytest.raises(ConfigError, match=rf"field '{field}' .*(state-space|attention layers)"):
        _read(tmp_path, {**LLAMA, **extra})


def test_attention_layer_kinds_still_read():
    full = ["full_attention"] * 16 + ["sliding_attention"] * 16  # gpt-oss / Gemma 3 style
    model = get_model(DATA / "hf_configs" / "gpt-oss-120b" / "config.json")
    assert model.sliding_layers == 18
    config = {**LLAMA, "layer_types": full, "sliding_window": 4096}
    path_model = _read_dict(config)
    assert path_model.sliding_layers == 16


def _read_dict(config):
    from itlkit.physics.hf_config import model_from_hf_dict

    return model_from_hf_dict(config, where="runs.json", slug="x")
