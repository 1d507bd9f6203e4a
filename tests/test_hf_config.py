"""Hostile and unusual config.json files: each bad field is refused in one line naming it."""

import json

import pytest
from _paths import DATA

from itlkit.errors import ConfigError
from itlkit.physics.model_catalog import get_model

LLAMA = json.loads((DATA / "hf_configs" / "llama-3.1-8b" / "config.json").read_text())
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
    with pytest.raises(ConfigError, match=rf"config.json: field '{field}' must be a positive"):
        _read(tmp_path, {**LLAMA, field: bad})


def test_integral_floats_and_nulls_read_as_integers_and_absent(tmp_path):
    model = _read(tmp_path, {**LLAMA, "hidden_size": 4096.0, "head_dim": None})
    assert model.hidden_size == 4096 and model.attention_head_dim == 128
    assert model.total_params == 8_030_261_248


def test_zero_kv_heads_is_refused_not_read_as_every_head(tmp_path):
    # Before: `int(0 or heads)` silently made 32 KV heads (4x the KV bytes).
    with pytest.raises(ConfigError, match="'num_key_value_heads' must be a positive integer"):
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
    with pytest.raises(ConfigError, match="'num_local_experts' must be an integer >= 0"):
        _read(tmp_path, {**MIXTRAL, "num_local_experts": bad})


@pytest.mark.parametrize("bad", [0, -1, "2"])
def test_top_k_must_be_positive(tmp_path, bad):
    with pytest.raises(ConfigError, match="'num_experts_per_tok' must be a positive integer"):
        _read(tmp_path, {**MIXTRAL, "num_experts_per_tok": bad})


def test_moe_without_top_k_is_refused(tmp_path):
    config = {k: v for k, v in MIXTRAL.items() if k != "num_experts_per_tok"}
    with pytest.raises(ConfigError, match="'num_experts_per_tok' is missing"):
        _read(tmp_path, config)


@pytest.mark.parametrize("bad", [-4096, "4096", 4096.5])
def test_sliding_window_must_be_a_non_negative_integer(tmp_path, bad):
    # Before: -4096 gave negative KV bytes.
    with pytest.raises(ConfigError, match="'sliding_window' must be an integer >= 0"):
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
    with pytest.raises(ConfigError, match="'qk_rope_head_dim' must be a positive integer"):
        _read(tmp_path, {**config, "qk_rope_head_dim": -64})
    with pytest.raises(ConfigError, match="'first_k_dense_replace' exceeds num_hidden_layers"):
        _read(tmp_path, {**config, "first_k_dense_replace": 62})
    with pytest.raises(ConfigError, match="'n_shared_experts' must be an integer >= 0"):
        _read(tmp_path, {**config, "n_shared_experts": "1"})


def test_model_type_and_text_config_must_have_the_right_shape(tmp_path):
    with pytest.raises(ConfigError, match="'model_type' must be a string"):
        _read(tmp_path, {**LLAMA, "model_type": 7})
    with pytest.raises(ConfigError, match="'text_config' must be a JSON object"):
        _read(tmp_path, {"model_type": "llama4", "text_config": "none"})
