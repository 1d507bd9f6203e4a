"""The corpus of real vLLM evidence (tests/data/real/) is well formed.

Every item folder holds the page as found (``metrics.prom``) or a ``vllm bench serve``
result (``bench.json``) and a ``provenance.md`` naming its source, licence, vLLM version and
model, with an ``expected`` block written by hand before any diagnosis ran. This test ties
that block to the file: it recomputes the inter-token-latency count from the page itself.
It deliberately does not import itlkit's diagnosis.
"""

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REAL = Path(__file__).parent / "data" / "real"
ITEMS = sorted(p for p in REAL.iterdir() if p.is_dir()) if REAL.is_dir() else []
# Newest name first; a page that carries both reports the same observations twice,
# so only one is counted.
ITL_FAMILIES = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
VERDICTS = {
    "host_overhead",
    "prefill_interference",
    "batch_or_context_growth",
    "preemption",
    "healthy",
    "insufficient",
}
REQUIRED_FIELDS = ("source", "licence", "vLLM version", "model")


def _provenance(item: Path) -> str:
    return (item / "provenance.md").read_text(encoding="utf-8")


def _expected(item: Path) -> dict[str, str]:
    match = re.search(r"^```expected\n(.*?)^```", _provenance(item), re.S | re.M)
    assert match, f"{item.name}: provenance.md has no ```expected block"
    fields = {}
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def _itl_count_from_page(text: str) -> int | None:
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ITL_FAMILIES:
        if name in families:
            return round(sum(s.value for s in families[name].samples if s.name == name + "_count"))
    return None


def _itl_count_from_bench(data: dict) -> int:
    return sum(len(request_itls) for request_itls in data["itls"])


def test_corpus_is_not_empty():
    assert ITEMS, "tests/data/real/ holds no items"


@pytest.mark.parametrize("item", ITEMS, ids=lambda p: p.name)
def test_provenance_names_source_licence_version_model(item):
    text = _provenance(item).lower()
    for field in REQUIRED_FIELDS:
        assert f"**{field.lower()}**" in text, f"{item.name}: provenance.md lacks **{field}**"
    expected = _expected(item)
    assert expected.get("expected_verdict") in VERDICTS, (
        f"{item.name}: expected_verdict must be one of {VERDICTS}"
    )
    assert "itl_count" in expected, f"{item.name}: expected block lacks itl_count"


@pytest.mark.parametrize("item", ITEMS, ids=lambda p: p.name)
def test_page_parses_and_itl_count_matches_expected(item):
    pages = [item / "metrics.prom", item / "bench.json"]
    present = [p for p in pages if p.exists()]
    assert present, f"{item.name}: neither metrics.prom nor bench.json"
    expected = _expected(item)["itl_count"]
    for path in present:
        if path.suffix == ".prom":
            count = _itl_count_from_page(path.read_text(encoding="utf-8"))
        else:
            count = _itl_count_from_bench(json.loads(path.read_text(encoding="utf-8")))
        if count is None:
            assert expected == "none", (
                f"{item.name}: page has no ITL/TPOT histogram, itl_count must be 'none'"
            )
        else:
            assert expected != "none" and count == int(expected), (
                f"{item.name}: page has {count}, expected {expected}"
            )
