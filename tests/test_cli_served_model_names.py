"""--model as users type it: the Hugging Face id they serve, read as its catalog architecture.

The reference analysis' Llama 3.1 8B streams 16,060,522,496 weight bytes a step (its safetensors
index, BF16); the served name of its instruct checkpoint must give the same bytes, and say how it
was read.
"""

import json

import pytest

from itlkit.cli import main

WORKED_EXAMPLE_WEIGHT_BYTES = 16_060_522_496  # shared/spec/worked-example.txt, llama-3.1-8b BF16


def explain(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["explain", "--gpu", "h100-sxm", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def assumed(text: str) -> list[str]:
    return [line.removeprefix("assumed: ") for line in text.splitlines()
            if line.startswith("assumed: ")]  # fmt: skip


def test_a_served_name_prices_its_catalog_architecture_and_says_so(capsys):
    assert main(["explain", "--json", "--gpu", "h100-sxm", "--model",
                 "meta-llama/Llama-3.1-8B-Instruct"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["weight_bytes"] == WORKED_EXAMPLE_WEIGHT_BYTES
    code, out, _ = explain(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct")
    assert code == 0
    assert assumed(out) == [
        "--model 'meta-llama/Llama-3.1-8B-Instruct' read as the catalog's llama-3.1-8b, the "
        "architecture its name gives"
    ]


def test_a_release_name_says_which_architecture_it_shares():
    from itlkit.cli._args import model_name

    assert "Llama 3 8B has Llama 3.1 8B's architecture" in model_name(
        "/models/Meta-Llama-3-8B-Instruct").said  # fmt: skip


def test_a_catalog_name_or_config_path_needs_no_assumption(capsys):
    code, out, _ = explain(capsys, "--model", "llama-3.1-8b")
    assert code == 0 and assumed(out) == []


@pytest.mark.parametrize(("given", "said"), [
    ([], "its name says fp8 weights, but --weights-precision is bf16: priced as bf16"),
    (["--weights-precision", "fp8"], None),
])  # fmt: skip
def test_a_precision_in_the_name_that_the_flags_do_not_price_is_said(capsys, given, said):
    code, out, _ = explain(capsys, "--model", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8",
                           "--tp", "1", *given)  # fmt: skip
    lines = assumed(out)
    assert code == 0 and lines[0].startswith("--model 'neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8'")
    assert lines[1].startswith(said) if said else len(lines) == 1


def test_an_unknown_served_name_is_one_line_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--model", "acme/Turbo-7B"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2
    assert "argument --model: unknown model 'acme/Turbo-7B'; valid models: llama-3.1-8b" in err


def test_simulate_lists_the_reading_among_its_assumptions(capsys):
    assert main(["simulate", "--json", "--model", "Qwen/Qwen3-235B-A22B-FP8",
                 "--weights-precision", "fp8", "--gpu", "h200-sxm", "--tp", "8",
                 "--rate", "1", "--duration", "20"]) == 0  # fmt: skip
    lines = json.loads(capsys.readouterr().out)["assumptions"]
    assert lines[0] == ("--model 'Qwen/Qwen3-235B-A22B-FP8' read as the catalog's "
                        "qwen3-235b-a22b, the architecture its name gives")  # fmt: skip
