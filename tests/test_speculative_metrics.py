"""Speculative decoding read off a page: tokens per step, and what that does to the ITL read.

vLLM's counters (vllm/v1/spec_decode/metrics.py @ 016a8587, `SpecDecodingProm`): mean acceptance
length = 1 + accepted / drafts; per position = accepted_i / drafts, positions from 0. SGLang's
`sglang:spec_accept_length` is the mean directly (accepted drafts + the bonus token).
"""

import json

import pytest
from _paths import DATA

from itlkit.cli import main

ITL = """\
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025",model_name="m"} 80.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 100.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 2.5
"""


def _spec(drafts: float, accepted: float, per_position=(70, 50, 30)) -> str:
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}',
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}',
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
    ]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",'
              f'position="{i}"}} {v}' for i, v in enumerate(per_position)]  # fmt: skip
    return ITL + "\n".join(lines) + "\n"


def _warnings(capsys, *paths) -> list[str]:
    assert main(["histogram", "--json", *map(str, paths)]) == 0
    return json.loads(capsys.readouterr().out)["warnings"]


def test_vllms_counters_give_tokens_per_step_and_the_per_token_latency(tmp_path, capsys):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_spec(100, 150))  # 1 + 150 / 100 = 2.5 tokens per step
    (note,) = [w for w in _warnings(capsys, page) if w.startswith("speculative")]
    assert "2.50 tokens per step" in note and "~0.40x the gap read here" in note


def test_over_a_period_the_counters_increase_is_read(tmp_path, capsys):
    a = tmp_path / "metrics-20261205T120000Z.prom"
    b = tmp_path / "metrics-20261205T120100Z.prom"
    a.write_text(_spec(100, 150))
    later = _spec(300, 550, per_position=(210, 190, 150))
    b.write_text(
        later.replace(" 100.0", " 200.0").replace(" 80.0", " 160.0").replace(" 2.5", " 5.0")
    )
    # 200 more drafts, 400 more accepted: 1 + 400 / 200 = 3.0 in the minute between them
    (note,) = [w for w in _warnings(capsys, a, b) if w.startswith("speculative")]
    assert "3.00 tokens per step" in note


def test_sglangs_accept_length_on_a_real_page(capsys):
    page = DATA / "sglang" / "lss-tp4-specdec-priority.prom"  # spec_accept_length 3.1, line 804
    (note,) = [w for w in _warnings(capsys, page) if w.startswith("speculative")]
    assert "3.10 tokens per step (sglang:spec_accept_length)" in note
    assert "a step takes ~3.10x the per-token gap" in note


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (_spec(0, 10, per_position=()), "rose by 10 with no draft"),
        (_spec(100, 400), "4.00 per draft, more than the 3 positions a draft has"),
    ],
)
def test_impossible_speculative_counters_are_one_line(tmp_path, capsys, page, message):
    path = tmp_path / "metrics-20261205T120000Z.prom"
    path.write_text(page)
    assert main(["histogram", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_drafts_without_an_accepted_counter_say_the_tokens_per_gap_are_unknown(tmp_path, capsys):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    text = _spec(100, 150)
    page.write_text("\n".join(s for s in text.splitlines() if "accepted" not in s) + "\n")
    (note,) = [w for w in _warnings(capsys, page) if w.startswith("speculative")]
    assert "without vllm:spec_decode_num_accepted_tokens_total" in note and "unknown" in note


def test_a_restart_between_scrapes_counts_from_the_restart(tmp_path, capsys):
    a = tmp_path / "metrics-20261205T120000Z.prom"
    b = tmp_path / "metrics-20261205T120100Z.prom"
    a.write_text(_spec(1000, 1500, per_position=(700, 500, 300)))
    b.write_text(_spec(100, 250, per_position=(90, 80, 80)))  # restarted: 1 + 250 / 100
    (note,) = [w for w in _warnings(capsys, a, b) if w.startswith("speculative")]
    assert "3.50 tokens per step" in note


@pytest.mark.parametrize(("batch", "said"), [("64", "faster"), ("120", "slower: past the ridge")])
def test_a_diagnosis_says_whether_speculation_pays_at_the_incidents_batch(
    tmp_path, capsys, batch, said
):
    # k = 3 positions accepted 60, 36 and 21.6 times in 100 drafts: geometric acceptance 0.6,
    # 2.176 tokens per step; tests/test_speculative.py derives by hand that for Llama 3.1 8B on
    # an H100 at 512 tokens of context speculation stops paying at batch 99
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_spec(100, 117.6, per_position=(60, 36, 21.6)))
    args = ["diagnose", str(page), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
            "--batch", batch, "--context", "512"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "speculative decoding, k = 3, 2.18 tokens per step" in out
    assert "it stops paying at batch 99 at this context" in out and said in out


def test_low_acceptance_is_named(tmp_path, capsys):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_spec(100, 30, per_position=(20, 8, 2)))  # 1.30 tokens per step
    assert main(["diagnose", str(page), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--batch", "32", "--context", "512"]) == 0  # fmt: skip
    assert "speculative acceptance is low: 1.30 tokens per step" in capsys.readouterr().out
