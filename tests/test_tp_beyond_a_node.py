"""TP beyond one node's GPUs: the link its all-reduces are priced over is said, never silently
NVLink (an 8-GPU HGX or MI300X board joins 8 GPUs by its scale-up link)."""

import copy
import json

import pytest
from _paths import REAL_RUNS

from itlkit.cli import main
from itlkit.physics.roofline import Deployment, tp_link_assumption
from itlkit.sim.runs import parse_runs

DOC = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text())


def assumed(capsys, *args: str) -> list[str]:
    assert main(["explain", "--model", "deepseek-v3", "--weights-precision", "fp8",
                 "--gpu", "h200-sxm", *args]) == 0  # fmt: skip
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("assumed:")]


def test_tp_16_over_the_gpus_own_link_is_said(capsys):
    (line,) = assumed(capsys, "--tp", "16")
    assert "TP 16's all-reduces are priced over the h200-sxm's own link" in line
    assert "--interconnect network" in line


@pytest.mark.parametrize(
    "flags",
    [
        ("--tp", "8"),
        ("--tp", "16", "--interconnect", "network"),
        ("--tp", "16", "--interconnect", "nvlink"),
    ],
)  # one domain, said
def test_one_node_or_a_given_link_needs_no_assumption(capsys, flags):
    assert assumed(capsys, *flags) == []


def test_a_pcie_gpu_is_not_said_to_use_nvlink():
    dep = Deployment.create(model="llama-3.1-70b", gpu="l40s", tp=16)  # no NVLink: PCIe
    assert dep.link_kind == "pcie" and tp_link_assumption(dep) is None


def test_a_run_at_tp_16_says_it_too():
    doc = copy.deepcopy(DOC)
    doc["runs"] = [r for r in doc["runs"] if r["id"] == "trainval:64"]  # Qwen2.5-7B: 28 heads
    run = doc["runs"][0]
    run.update(model="llama-3.1-70b", tp=16, gpus=16, weights_precision="bf16")
    (parsed,) = parse_runs(copy.deepcopy(doc), source="runs.json")
    assert any("TP 16's all-reduces" in line for line in parsed.engine_assumptions)
    run["interconnect"] = "network"
    (parsed,) = parse_runs(doc, source="runs.json")
    assert not any("TP 16's" in line for line in parsed.engine_assumptions)
