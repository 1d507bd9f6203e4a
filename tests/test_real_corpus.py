"""The corpus of real vLLM evidence (data/real-pages/) is well formed.

Every item folder holds the page as found (``metrics.prom``) or a ``vllm bench serve``
result (``bench.json``) and a ``provenance.md`` naming its source, licence, vLLM version and
model, with an ``expected`` block written by hand before any diagnosis ran. This test ties
that block to the file: it recomputes the inter-token-latency count from the page itself
(with prometheus_client, not itlkit). A second part runs itlkit on each item and checks the
hand-argued reading (see ARGUED below); disagreements are strict xfails.
"""

import json
import re
from pathlib import Path

import pytest
from _paths import BUNDLED_CALIBRATION, REAL_PAGES
from prometheus_client.parser import text_string_to_metric_families

REAL = REAL_PAGES
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


def _itl_count_from_bench(data: dict) -> int | None:
    if "itls" not in data:  # a summary-only result: no per-gap samples to count
        return None
    return sum(len(request_itls) for request_itls in data["itls"])


def test_corpus_is_not_empty():
    assert ITEMS, "data/real-pages/ holds no items"


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


# --- itlkit against the corpus -------------------------------------------------------------
# Each row was argued by hand from the page (see the item's provenance.md) before itlkit ran on
# it. `p50_seconds` is Prometheus' histogram_quantile(0.5) worked out from the page's own bucket
# counts (rank = 0.5 * count, linear inside the bucket that holds the rank), written out in the
# comment. Where itlkit's verdict differs from the argued one, the verdict check is a strict
# xfail that names itlkit's line today: it turns into a failure the day itlkit agrees.

ARGUED = {
    "francetravail-llama3-8b-v0.4": dict(
        itl_family="vllm:time_per_output_token_seconds",
        # rank 0.5 * 3073096 = 1536548; bucket (0.01, 0.025] holds 2047565 from 0
        p50_seconds=0.01 + 0.015 * 1536548 / 2047565,
        verdict="prefill_interference",
    ),
    "kubeai-llama31-8b-fp8-v0.5": dict(
        itl_family="vllm:time_per_output_token_seconds",
        # rank 0.5 * 2537 = 1268.5; bucket (0.025, 0.05] holds 2519 from 0
        p50_seconds=0.025 + 0.025 * 1268.5 / 2519,
        verdict="prefill_interference",
    ),
    "armandos-qwen3-4b-fp8-ngc25.09": dict(
        itl_family="vllm:time_per_output_token_seconds",
        # rank 0.5 * 1733 = 866.5; bucket (0.01, 0.025] holds 1731 from 0:
        # 0.01 + 0.015 * 866.5 / 1731
        p50_seconds=0.01 + 0.015 * 866.5 / 1731,
        verdict="healthy",
        # provenance: "on a data-centre GPU it would be host-bound"; the GPU is not stated, so
        # host overhead may be named on some plausible GPUs but not on every one
        gpu_dependent=("host_overhead",),
    ),
    "hwrouter-qwen1.5-0.5b-idle-v0.11": dict(
        itl_family="vllm:inter_token_latency_seconds",  # both names on the page, both empty
        p50_seconds=None,  # no observations: no quantile
        verdict="insufficient",
        refusal="itlkit diagnose: error: the ITL histogram recorded no observations in the period",
    ),
    "er0080-opt125m-tp2-3090-loaded-v0.25": dict(
        itl_family="vllm:inter_token_latency_seconds",
        # rank 0.5 * 164629 = 82314.5; first bucket (0, 0.01] holds 155912
        p50_seconds=0.01 * 82314.5 / 155912,
        verdict="host_overhead",
        # What the poster stated and the page cannot carry (provenance: gpu_stated true):
        # facebook/opt-125m, which is not in itlkit's catalog (its public config.json is in
        # tests/data/hf_configs), on RTX 3090s. TP=2 itlkit reads from the served name.
        stated=["--model", "tests/data/hf_configs/opt-125m/config.json", "--gpu", "rtx-3090"],
        # the argued second cause: the 4 % slow cluster is prefill-carrying steps
        second="prefill_interference",
    ),
    "er0080-opt125m-tp2-3090-idle-v0.25": dict(
        itl_family="vllm:inter_token_latency_seconds",  # only the new name on a 0.25 page
        p50_seconds=None,  # no observations: no quantile
        verdict="insufficient",
        refusal="itlkit diagnose: error: the ITL histogram recorded no observations in the period",
    ),
    # bench summaries: p50 is the file's own median_itl_ms (vLLM's np.median of every gap)
    "er0080-opt125m-3090-bench-v0.25": dict(
        completed=8,
        p50_seconds=10.492878499917424 / 1e3,
        verdict="host_overhead",
        # the file's own model_id, facebook/opt-125m, whose config.json is in tests/data
        stated=["--model", "tests/data/hf_configs/opt-125m/config.json"],
    ),
    "er0080-opt125m-3090-sweep-seqs4-v0.25": dict(
        completed=8,
        p50_seconds=7.372754000243731 / 1e3,
        verdict="host_overhead",
        # the file's own model_id, facebook/opt-125m, whose config.json is in tests/data
        stated=["--model", "tests/data/hf_configs/opt-125m/config.json"],
    ),
    "er0080-qwen27b-fp8-tp2-3090-specdec-bench-v0.25": dict(
        completed=8,
        p50_seconds=44.10335549619049 / 1e3,
        verdict="healthy",
    ),
    "er0080-opt125m-all-failed-v0.25": dict(
        completed=0,
        p50_seconds=None,
        verdict="insufficient",
        refusal=(
            "itlkit diagnose: error: {page}: the benchmark completed no request (every request "
            "failed): nothing was measured; see the server's log for the cause"
        ),
        histogram_refusal=(
            "itlkit histogram: error: {page}: the benchmark completed no request (every request "
            "failed): nothing was measured; see the server's log for the cause"
        ),
    ),
}
DISAGREES = {
    "francetravail-llama3-8b-v0.4": (
        "itlkit today: 'No cause stands out (every score < 0.5): ITL p50 21.26 ms is 4.3x the "
        "4.95 ms floor.' -- it finds the 1.3 % cluster above 0.2 s, but a single scrape has no "
        "time axis, so it cannot tie it to arrivals"
    ),
    "kubeai-llama31-8b-fp8-v0.5": (
        "itlkit today: 'No cause stands out (every score < 0.5)'; the KV size narrows the GPU "
        "to the 24 GB cards, and the verdict still hangs on which (healthy on L4/A10, host "
        "overhead on RTX 3090/4090); it names the 18-observation cluster behind the empty "
        "bucket (2 per arrival) but does not score it: the slow-mode gates want >= 1 % at >= 3x"
    ),
    "er0080-qwen27b-fp8-tp2-3090-specdec-bench-v0.25": (
        "itlkit today: 'a bench summary can only be judged against its model's floor, and "
        "model_id 'Qwen/Qwen3.8-27B-FP8' is not in the catalog' -- the argued verdict is "
        "healthy; its speculation is read (tests/test_bench_speculation.py, which judges it "
        "with a stand-in model)"
    ),
}


def _page(slug: str) -> Path:
    page = REAL / slug / "metrics.prom"
    return page if page.exists() else REAL / slug / "bench.json"


def _run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from itlkit.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_every_item_is_argued():
    assert {p.name for p in ITEMS} == set(ARGUED)
    assert set(DISAGREES) <= set(ARGUED)


@pytest.mark.parametrize("slug", sorted(ARGUED))
def test_histogram_reads_the_page_and_its_p50_is_the_hand_computed_one(slug, capsys):
    argued = ARGUED[slug]
    page = _page(slug)
    code, out, err = _run_cli(["histogram", "--json", str(page)], capsys)
    if "histogram_refusal" in argued:
        assert (code, err.strip()) == (2, argued["histogram_refusal"].format(page=page))
        return
    assert code == 0
    doc = json.loads(out)
    if page.suffix == ".json":  # a summary-only bench result: vLLM's own statistics
        (summary,) = doc["bench_summaries"]
        assert doc["metric"] == "itl"
        assert summary["completed"] == argued["completed"]
        assert summary["median_seconds"] == pytest.approx(argued["p50_seconds"], rel=1e-12)
        return
    assert doc["family"] == argued["itl_family"]
    assert doc["count"] == int(_expected(REAL / slug)["itl_count"])
    if argued["p50_seconds"] is None:
        assert doc["p50_seconds"] is None
    else:
        assert doc["p50_seconds"] == pytest.approx(argued["p50_seconds"], rel=1e-9)


def _verdict_params():
    for slug in sorted(ARGUED):
        marks = ()
        if slug in DISAGREES:
            marks = pytest.mark.xfail(strict=True, reason=DISAGREES[slug])
        yield pytest.param(slug, marks=marks, id=slug)


@pytest.mark.parametrize("slug", list(_verdict_params()))
def test_diagnosis_gives_the_argued_verdict(slug, capsys):
    argued = ARGUED[slug]
    assert _expected(REAL / slug)["expected_verdict"] == argued["verdict"]
    code, out, err = _run_cli(["diagnose", "--json", *argued.get("stated", ()), str(_page(slug))],
                              capsys)  # fmt: skip
    if "refusal" in argued:
        assert (code, err.strip()) == (2, argued["refusal"].format(page=_page(slug)))
        return
    assert code == 0
    doc = json.loads(out)
    verdict = "healthy" if doc["healthy"] else doc["causes"][0]["cause"]
    assert verdict == argued["verdict"]


# --- scores pinned to margins (issue 11, item 6) ---------------------------------------------
# The argued cause >= 0.7 and every other <= 0.3 (healthy: every cause <= 0.3), on the pages
# itlkit agrees with; ARGUED's `second` is the argued exception (a cause the provenance names
# second, which may score in between but stays below the first).
AGREED = sorted(s for s, a in ARGUED.items() if s not in DISAGREES and "refusal" not in a)


@pytest.mark.parametrize("slug", AGREED)
def test_the_argued_cause_wins_by_the_margins(slug, capsys):
    argued = ARGUED[slug]
    _, out, _ = _run_cli(["diagnose", "--json", *argued.get("stated", ()), str(_page(slug))],
                         capsys)  # fmt: skip
    doc = json.loads(out)
    scores = {c["cause"]: c["score"] for c in doc["causes"]}
    gpu_range = doc.get("gpu_range")  # a bench file's summary has no per-GPU range
    depends = gpu_range["depends_on_gpu"] if isinstance(gpu_range, dict) else []
    assert set(depends) <= set(argued.get("gpu_dependent", ())), depends
    for cause, score in scores.items():
        if cause in depends:  # named on some plausible GPUs only: the report says which
            assert not next(c for c in doc["causes"] if c["cause"] == cause)["named"]
        elif cause == argued["verdict"]:
            assert score >= 0.7, scores
        elif cause == argued.get("second"):
            assert score < scores[argued["verdict"]], scores
        else:
            assert score <= 0.3, (cause, scores)


def test_the_opt_page_finds_the_slow_cluster_and_judges_the_step_against_the_host(capsys):
    # By hand (provenance): 155 912 obs <= 10 ms, 2 069 in 10-25 ms (138/ms: the valley), 6 648 in
    # 25-50 ms (266/ms). The 25-50 ms cluster's mean is its midpoint, 37.5 ms; the main cluster's
    # is the rest of the _sum: (998.1225105317717 - 6648 * 0.0375) / (155912 + 2069).
    slug = "er0080-opt125m-tp2-3090-loaded-v0.25"
    _, out, _ = _run_cli(["diagnose", "--json", *ARGUED[slug]["stated"], str(_page(slug))], capsys)
    doc = json.loads(out)
    main, slow = doc["clusters"]
    assert (main["observations"], slow["observations"]) == (157981, 6648)
    assert slow["share"] == pytest.approx(6648 / 164629, rel=1e-12)
    assert (slow["lower_seconds"], slow["upper_seconds"]) == (0.025, 0.05)
    assert main["mean_seconds"] == pytest.approx((998.1225105317717 - 6648 * 0.0375) / 157981)
    # a healthy host: vLLM 0.15.1's, per step + 64 x per sequence (data/calibration.json, the
    # constants fitted on its H100 runs)
    host = json.loads(BUNDLED_CALIBRATION.read_text())["groups"]["gpu:h100"]
    healthy = host["host_seconds_per_step"] + 64 * host["host_seconds_per_sequence"]
    assert doc["healthy_host_seconds"] == pytest.approx(healthy, rel=1e-12)
    assert doc["tp"] == 2  # from the served name 'opt-125m-tp2'


def test_the_opt_page_without_its_gpu_says_the_verdict_hangs_on_it(capsys):
    # With the model but not the GPU, the page's KV cache narrows the GPU: 25,028 blocks x 16
    # tokens x 18,432 B (12 layers x 12 heads x 64 x 2 x 2 B, half per GPU at TP 2) = 7.38 GB
    # per GPU beside ~0.13 GB of weights in 30% of memory: (7.38 + 0.13) / 0.3 = 25.0 GB, read
    # as GiB 23.3 GB, up to (7.5 + 3 GB reserve) / (0.3 x 0.9) = 38.9 GB: the 24 GB cards and
    # the 32 GB RTX 5090. On an L4 (300 GB/s) the floor is ~2.9 ms, so a 4.7 ms step is not
    # host-bound there; on the RTX 3090 the poster used (936 GB/s, ~0.9 ms floor) it is. No
    # cause holds on every GPU, so none is named, and the report says which GPUs would flip it.
    from itlkit.physics.hardware import GPUS

    slug = "er0080-opt125m-tp2-3090-loaded-v0.25"
    _, out, _ = _run_cli(["diagnose", "--json", *ARGUED[slug]["stated"][:2], str(_page(slug))],
                         capsys)  # fmt: skip
    doc = json.loads(out)
    assert doc["gpu_range"]["verdict_holds"] is False
    assert doc["healthy"]
    by_gpu = {g["gpu"]: g["verdict"] for g in doc["gpu_range"]["gpus"]}
    expected = {name for name, gpu in GPUS.items() if 23.3e9 <= gpu.hbm_bytes <= 38.9e9}
    assert set(by_gpu) == expected and {"l4", "rtx-3090", "rtx-5090"} <= expected
    assert (by_gpu["l4"], by_gpu["rtx-3090"]) == ("healthy", "host_overhead")
    flipped = doc["gpu_range"]["flipped_by"]
    assert "rtx-3090" in flipped and "l4" not in flipped
    # host overhead is named on some plausible GPUs, not all: not named, and said per GPU
    assert doc["gpu_range"]["depends_on_gpu"] == ["host_overhead"]
    naming = [g["gpu"] for g in doc["gpu_range"]["gpus"] if g["scores"]["host_overhead"] >= 0.5]
    assert "rtx-3090" in naming and "l4" not in naming
    assert f"host overhead between GPU kernels is named only on {', '.join(naming)}" in (
        doc["verdict"])  # fmt: skip
    assert [c["named"] for c in doc["causes"]] == [False] * 4
    assert any(a.startswith("GPU one of ") and "25,028 blocks" in a for a in doc["assumptions"])
    _, text, _ = _run_cli(["diagnose", *ARGUED[slug]["stated"][:2], str(_page(slug))], capsys)
    assert f"host overhead between GPU kernels: named on {', '.join(naming)} (scores" in text
    assert "unimodal" not in text


def test_the_kubeai_page_kv_cache_points_to_a_24_gb_card(capsys):
    # 4,574 blocks x 16 tokens x 131,072 B (Llama 3.1 8B, BF16 KV) = 9.59 GB beside 8.03 GB of
    # FP8 weights in 90% of memory: (9.59 + 8.03) / 0.9 = 19.6 GB (18.2 as GiB) up to
    # (17.6 + 3) / (0.9 x 0.9) = 25.5 GB, as the provenance argued (a ~24 GB card)
    from itlkit.physics.hardware import GPUS

    _, out, _ = _run_cli(["diagnose", "--json", str(_page("kubeai-llama31-8b-fp8-v0.5"))], capsys)
    doc = json.loads(out)
    expected = {name for name, gpu in GPUS.items() if 18.2e9 <= gpu.hbm_bytes <= 25.5e9}
    assert {g["gpu"] for g in doc["gpu_range"]["gpus"]} == expected
    assert {"l4", "a10", "rtx-3090", "rtx-4090"} <= expected and "h100-sxm" not in expected


def test_the_francetravail_page_says_the_evidence_is_not_enough(capsys):
    # Above the 0.2 s bound: 3,073,096 - 3,033,162 = 39,934 of 3,073,096 gaps = 1.30%, far
    # beyond the 10-25 ms main cluster; one scrape cannot tie them to arrivals or preemptions,
    # so the honest answer names them and says why no cause can be named (the argued verdict,
    # prefill interference, stays a strict xfail above)
    slug = "francetravail-llama3-8b-v0.4"
    _, out, _ = _run_cli(["diagnose", "--json", str(_page(slug))], capsys)
    doc = json.loads(out)
    assert doc["healthy"]
    share = 39934 / 3073096
    assert (
        f"The evidence is not enough to name what makes the {share:.1%} of gaps" in doc["verdict"]
    )
    assert "one scrape has no time axis" in doc["verdict"]


def test_an_impossible_kv_usage_gauge_is_named_not_printed_as_a_percentage(capsys):
    # The francetravail page's vllm:gpu_cache_usage_perc is 4.2 (provenance.md: most likely
    # hand-edited), while vLLM sets it to 1 - free / total blocks, in [0, 1]: 420% is no reading
    _, out, _ = _run_cli(["diagnose", "--json", str(_page("francetravail-llama3-8b-v0.4"))], capsys)
    lines = [e for c in json.loads(out)["causes"] for e in c["evidence"] if "KV cache usage" in e]
    assert lines == ["the KV cache usage gauge reads 4.2, outside its 0-1 range (1 means 100%): "
                     "the gauge is wrong (edited or mis-set), so it is not used"]  # fmt: skip


def test_the_kubeai_page_names_its_small_cluster_as_unexplained(capsys):
    # 2,519 gaps in (25, 50] ms, then an empty (50, 75] bucket, then 18 in (75, 100] ms:
    # 18 / 2,537 = 0.71% behind an empty bucket, about 2x the main cluster; one scrape cannot
    # tie them to arrivals, so the verdict says the evidence is not enough (the argued prefill
    # interference stays a strict xfail above)
    _, out, _ = _run_cli(["diagnose", "--json", str(_page("kubeai-llama31-8b-fp8-v0.5"))], capsys)
    verdict = json.loads(out)["verdict"]
    assert f"The evidence is not enough to name what makes the {18 / 2537:.1%} of gaps" in verdict
    assert "one scrape has no time axis" in verdict
