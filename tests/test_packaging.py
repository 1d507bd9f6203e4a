"""Packaging: environment.yml (conda/Binder) lists exactly the dependencies of pyproject.toml;
`itlkit.__version__` is the installed version; physics and `itlkit explain` load no pandas."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?\s*(?P<spec>[^;]*)"
)
CONDA_ONLY = {"python", "pip"}  # the interpreter and the installer, not dependencies of itlkit


def parse_requirement(text: str) -> tuple[str, str]:
    """``"PyYAML >= 6"`` -> ``("pyyaml", ">=6")``: PEP 503 name (with extras), sorted specifiers."""
    match = REQUIREMENT.match(text)
    if match is None:
        raise ValueError(f"not a requirement: {text!r}")
    name = re.sub(r"[-_.]+", "-", match["name"]).lower()
    if match["extras"]:
        name += "[" + ",".join(sorted(e.strip().lower() for e in match["extras"].split(","))) + "]"
    spec = ",".join(sorted(part for part in re.sub(r"\s+", "", match["spec"]).split(",") if part))
    return name, spec


def pyproject_dependencies() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines.extend(extra)
    return dict(parse_requirement(line) for line in lines)


def environment() -> dict:
    return yaml.safe_load((REPO_ROOT / "environment.yml").read_text())


def environment_dependencies() -> dict[str, str]:
    requirements = []
    for entry in environment()["dependencies"]:
        if isinstance(entry, dict):  # the `pip:` section; skip options and local paths
            requirements.extend(e for e in entry["pip"] if not e.startswith(("-", ".", "/")))
        else:
            requirements.append(entry)
    parsed = [parse_requirement(line) for line in requirements]
    names = [name for name, _ in parsed]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"environment.yml lists these twice: {duplicates}"
    return {name: spec for name, spec in parsed if name not in CONDA_ONLY}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PyYAML >= 6", ("pyyaml", ">=6")),
        ("prometheus_client>=0.20", ("prometheus-client", ">=0.20")),
        ("numpy<3, >=1.26", ("numpy", "<3,>=1.26")),
        ("jsonschema[format-nongpl]>=4", ("jsonschema[format-nongpl]", ">=4")),
        ("ruff ; python_version >= '3.11'", ("ruff", "")),
    ],
)
def test_parse_requirement(text: str, expected: tuple[str, str]):
    assert parse_requirement(text) == expected


def test_environment_yml_matches_pyproject():
    ours, conda = pyproject_dependencies(), environment_dependencies()
    problems = [f"missing from environment.yml: {n}{s}" for n, s in ours.items() if n not in conda]
    problems += [f"not in pyproject.toml: {n}{s}" for n, s in conda.items() if n not in ours]
    problems += [
        f"{name}: pyproject.toml says {ours[name]!r}, environment.yml says {conda[name]!r}"
        for name in ours.keys() & conda.keys()
        if ours[name] != conda[name]
    ]
    assert not problems, "\n".join(problems)


def test_environment_yml_python_matches_requires_python():
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pythons = [
        parse_requirement(entry)[1]
        for entry in environment()["dependencies"]
        if isinstance(entry, str) and parse_requirement(entry)[0] == "python"
    ]
    assert pythons == [parse_requirement("python" + requires["requires-python"])[1]]


def test_version_is_the_installed_distributions():
    import itlkit

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert itlkit.__version__ == project["version"]


def _modules_after(code: str) -> set[str]:
    """Top-level modules loaded by a fresh interpreter that runs `code`."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {name.split(".")[0] for name in out.split()}


@pytest.mark.parametrize(
    "code",
    [
        "import itlkit.physics.roofline",
        "import itlkit.physics.explain",
        "import itlkit.metrics.histogram",
        "import itlkit.metrics.scrape",
        "import itlkit, itlkit.physics, itlkit.metrics, itlkit.drill",
        "from itlkit.cli import main; main(['explain', '--json'])",
    ],
)
def test_physics_and_the_explain_command_do_not_load_pandas(code: str):
    loaded = _modules_after(code)
    assert "pandas" not in loaded
    assert "plotly" not in loaded and "ipywidgets" not in loaded


def constraints() -> dict[str, str]:
    """name -> pinned version of constraints.txt, the test environment's lock."""
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[parse_requirement(name)[0]] = version.strip()
    return pins


def test_the_lock_pins_every_dependency_within_pyproject_ranges():
    # make test installs with -c constraints.txt: each dependency pinned, to a version that
    # pyproject.toml allows (a lock outside the ranges would test what users cannot install)
    from packaging.specifiers import SpecifierSet

    pins = constraints()
    problems = []
    for name, spec in pyproject_dependencies().items():
        bare = name.split("[")[0]
        if bare not in pins:
            problems.append(f"{bare} is not pinned")
        elif pins[bare] not in SpecifierSet(spec):
            problems.append(f"{bare}=={pins[bare]} is outside pyproject's {spec}")
    assert not problems, "\n".join(problems)


def test_make_test_installs_from_the_lock():
    makefile = (REPO_ROOT / "Makefile").read_text()
    dev = makefile.split("$(DEV_STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert "constraints.txt" in dev.splitlines()[0]  # a changed lock reinstalls
    assert "pip install --quiet -c constraints.txt -e '.[notebooks,dev]'" in dev
    lab = makefile.split("$(NOTEBOOKS_STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert "constraints" not in lab  # users get pyproject's ranges


# --- the top-level data/ (issue 19, item 10) ------------------------------------------------


def test_every_package_is_listed_and_data_maps_to_the_top_level_folder():
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for init in (REPO_ROOT / "itlkit").rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk | {"itlkit.data"}
    assert setuptools["package-dir"] == {"itlkit.data": "data"}
    assert not (REPO_ROOT / "itlkit" / "data").exists()  # one copy: the top-level data/


def test_an_installed_package_carries_the_examples_but_not_the_third_party_pages(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path / "dist"), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("itlkit-*.whl"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "zipfile", "-e", str(wheel), str(target)], check=True)
    names = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    assert "itlkit/data/calibration.json" in names
    assert "itlkit/data/scenarios/mixed/scenario.json" in names
    assert not any("real-pages" in n or "real-runs" in n or "moe-kernels" in n for n in names)
    # imported from the installed copy, away from any checkout, the library finds its data
    code = ("from itlkit.bundled import scenario_folder; p = scenario_folder('mixed'); "
            "print(p); assert (p / 'scenario.json').is_file()")  # fmt: skip
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                           text=True, env={"PYTHONPATH": str(target)}, timeout=120)  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().startswith(str(target / "itlkit" / "data"))
