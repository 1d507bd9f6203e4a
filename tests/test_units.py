import pytest

from itlkit.errors import UnknownNameError
from itlkit.units import PRECISIONS, format_bytes, format_seconds, kv_precision, weight_precision


def test_bytes_per_element_are_floats_and_int4_is_half_a_byte():
    assert PRECISIONS["int4"].bytes_per_element == 0.5
    assert PRECISIONS["bf16"].bytes_per_element == 2.0
    assert PRECISIONS["fp8"].bytes_per_element == 1.0


def test_kv_cache_rejects_weight_only_formats_and_lists_valid_names():
    with pytest.raises(UnknownNameError, match=r"valid KV precisions: bf16, fp16, fp8"):
        kv_precision("int4")
    with pytest.raises(UnknownNameError, match="valid weight precisions: bf16, fp16, fp8, int8"):
        weight_precision("nf4")
    with pytest.raises(UnknownNameError, match=r"valid KV precisions: bf16, fp16, fp8"):
        kv_precision("fp4")


def test_display_uses_decimal_prefixes():
    assert format_bytes(16_060_522_496) == "16.06 GB"
    assert format_seconds(0.015050) == "15.05 ms"
    assert format_seconds(2.5) == "2.50 s"
    assert format_seconds(250e-6) == "250.0 µs"
