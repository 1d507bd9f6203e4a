# make lab    - create .venv, install itlkit with the notebook extras, open JupyterLab on notebooks/
# make present - serve the notebooks with Voila: code hidden, widgets live (PRESENT_PORT=8866)
# make test   - lint + the whole test suite (unit, notebooks executed, Prometheus, browser)
# make bench  - run every benchmarks/bench_*.py
# make lock   - re-resolve the test environment's pins (constraints.txt) from pyproject's ranges
# make clean  - remove .venv and everything the tests and tools leave behind
# Needs only Python 3.11+ and make (browser and Prometheus tests also want Debian's chromium and
# prometheus; without them they skip, or fail under CI=true).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_TIMEOUT ?= 1200
LAB_NOTEBOOK ?= 01_decode_floor.ipynb

# A stamp per install: re-running a target reinstalls only when pyproject.toml changed.
NOTEBOOKS_STAMP := $(VENV)/.installed-notebooks
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: lab present test lint bench clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# rfc3987-syntax builds ~38 grammars at import and makes the first FigureWidget in every kernel
# take 3-14 s (shared/spec/jupyter-testing.md, pitfall 1); nothing of ours needs it.
$(NOTEBOOKS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[notebooks]'
	-$(BIN)/pip uninstall --quiet -y rfc3987-syntax
	touch $@

# The dev install is a superset, so it also satisfies `make lab`. It takes the versions pinned in
# constraints.txt (`make lock` refreshes them on purpose), so a new release of a dependency cannot
# turn the tests red unannounced; `make lab` alone installs the newest within pyproject's ranges.
$(DEV_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[notebooks,dev]'
	-$(BIN)/pip uninstall --quiet -y rfc3987-syntax
	touch $@ $(NOTEBOOKS_STAMP)

# Jupyter refuses to run as root without --allow-root (containers, CI machines).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# JupyterLab 4 asks "Would you like to get notified about official Jupyter news?" in a toast over
# the figures until answered (news_url=None only stops the server fetching the feed); defaults in
# its application settings' overrides.json answer "no" (tests/_lab.py gives its servers the same).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
lab: $(NOTEBOOKS_STAMP)
	mkdir -p $(LAB_SETTINGS)
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}' \
		> $(LAB_SETTINGS)/overrides.json
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT) \
		--LabApp.default_url=/lab/tree/$(LAB_NOTEBOOK) \
		--LabApp.news_url=None \
		--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate

# Voila lists notebooks/ at http://localhost:$(PRESENT_PORT)/; each opens as an app (code hidden).
PRESENT_PORT ?= 8866
present: $(NOTEBOOKS_STAMP)
	$(BIN)/voila notebooks --no-browser --port=$(PRESENT_PORT) --Voila.ip=127.0.0.1 \
		--show_tracebacks=True

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# SIGINT on timeout lets pytest print where it hung and stop its servers; -k kills what is left.
test: lint
	timeout --signal=INT --kill-after=30 $(TEST_TIMEOUT) $(BIN)/python -m pytest

bench: $(NOTEBOOKS_STAMP)
	@set -e; for script in benchmarks/bench_*.py; do \
		[ -e "$$script" ] || { echo "no benchmarks/bench_*.py yet"; break; }; \
		echo "== $$script"; $(BIN)/python "$$script"; \
	done

# A fresh venv resolves pyproject's ranges to today's newest versions; their pins replace
# constraints.txt. Run the tests after it, and commit it as a change of its own.
LOCK_VENV := build/lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[notebooks,dev]'
	{ echo "# Pins of the test environment (make test, CI): make lock wrote them on $$(date -u +%F)"; \
	  echo "# with $$($(LOCK_VENV)/bin/python --version), from the ranges in pyproject.toml."; \
	  echo "# Refresh on purpose (make lock), run the tests, commit alone. make lab ignores it."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable | grep -v '^itlkit' ; } > constraints.txt
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache .hypothesis build benchmarks/out
	rm -rf itlkit.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name .ipynb_checkpoints -type d -prune -exec rm -rf {} +
