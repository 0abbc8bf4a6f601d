# Two commands set everything up on a fresh machine with only Python:
#   make demo   the main job (creates .venv, installs normlab with the lab extra, runs it)
#   make test   lint (ruff), types (mypy), then the whole test suite (creates .venv, installs
#               normlab with the test oracles, Ray, the checkpoint readers, the notebook tooling,
#               the linters and the documentation site; the companion notebooks are executed and
#               the site is built with warnings as errors too). `make test LINT=` skips the lint.
#   make lint   ruff check . and mypy (configured in pyproject.toml)
#   make docs   the documentation site (mkdocs, API reference from the docstrings) into site/
#   make notebooks   the companion notebooks executed and rendered to HTML in notebooks-html/
#   make results     the quick report from scratch, under normlab.portable's environment (the same
#                    bits on any AVX2 machine); its summary committed as docs/results/quick.json,
#                    and the lab table of docs/lab.md, the README's summary and the forest plot
#                    docs/img/verdicts-quick.png generated from it (`make tables` alone redraws
#                    them from the committed files)
#   make results ONLY=NAME   one experiment measured and merged into docs/results/quick.json and
#                    docs/lab.md's table (a new experiment, or one whose rules changed)
#   make results-full    the full report (the size of record; hours), under the same environment,
#                    into normlab-results-full/ and committed as docs/results/full.json; the
#                    tables show its verdicts beside the quick ones. It resumes: an interrupted
#                    run keeps its finished experiments (keyed by their configuration and the
#                    whole package's source) and training runs (keyed by theirs and the source
#                    that trains, so they survive a change to the report); FRESH=1 measures from
#                    scratch, RAY=auto|HOST:PORT sends the training runs to a Ray cluster, and
#                    ONLY=NAME measures one experiment (in the same folder, so it reuses the
#                    full run's finished training runs) and merges it into docs/results/full.json
#   make check-block the quick report at a disjoint block of seeds (seed 10000), committed as
#                    docs/results/quick-seed10000.json: docs/lab.md lists every verdict and
#                    counted row whose state differs from docs/results/quick.json's;
#                    check-block-full ONLY=NAME does the same for one experiment at the full
#                    size (docs/results/full-seed10000.json, against full.json)
#   make conformance the golden vectors, the other tools' results on them (in a venv of their own,
#                    .venv-conformance) and the conformance table of docs/numerics.md
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint docs docs-serve check bench notebooks results results-full tables check-block check-block-full \
	conformance clean

LINT ?= lint
ORACLES ?= .venv-conformance

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# demo: what the report runs (the lab extra), not the test oracles
$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[lab]'
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[lab,test,ray,hf,notebooks,dev,docs]'
	touch $@

demo: $(VENV)/.installed-lab
	$(BIN)/normlab report --out normlab-report

check: $(VENV)/.installed
	$(BIN)/normlab check

test: $(VENV)/.installed $(LINT)
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed
	$(BIN)/python -m ruff check .
	$(BIN)/python -m mypy

docs: $(VENV)/.installed
	$(BIN)/python -m mkdocs build --strict --site-dir site

docs-serve: $(VENV)/.installed
	$(BIN)/python -m mkdocs serve

bench: $(VENV)/.installed
	$(BIN)/normlab bench

# results are measured under normlab.portable's environment: the same bits on any AVX2 machine
PORTABLE := $(BIN)/python -m normlab.portable

results: $(VENV)/.installed-lab
ifdef ONLY
	$(PORTABLE) $(BIN)/normlab report --out normlab-results-$(ONLY) --no-cache --only $(ONLY)
	$(BIN)/normlab report --merge normlab-results-$(ONLY)/summary.json --results docs/results/quick.json
else
	$(PORTABLE) $(BIN)/normlab report --out normlab-results --no-cache
	mkdir -p docs/results
	cp normlab-results/summary.json docs/results/quick.json
endif
	$(MAKE) tables

# the quick report at a disjoint block of seeds (seed 10000), committed as
# docs/results/quick-seed10000.json and set beside the verdicts in docs/lab.md
check-block: $(VENV)/.installed-lab
	$(PORTABLE) $(BIN)/normlab report --out normlab-results-seed10000 --no-cache --seed 10000
	mkdir -p docs/results
	cp normlab-results-seed10000/summary.json docs/results/quick-seed10000.json
	$(MAKE) tables

# the full size at the disjoint block of seeds 10000, one experiment at a time (ONLY=NAME),
# merged into docs/results/full-seed10000.json and set beside the full verdicts in docs/lab.md
FULL_CHECK_OUT := normlab-results-full-seed10000
check-block-full: $(VENV)/.installed-lab
	$(if $(ONLY),,$(error check-block-full measures one experiment: ONLY=NAME))
	mkdir -p docs/results
	$(PORTABLE) $(BIN)/normlab report --out $(FULL_CHECK_OUT) --full --seed 10000 --only $(ONLY)
	if [ -f docs/results/full-seed10000.json ]; then \
		$(BIN)/normlab report --merge $(FULL_CHECK_OUT)/summary.json \
			--results docs/results/full-seed10000.json; \
	else cp $(FULL_CHECK_OUT)/summary.json docs/results/full-seed10000.json; fi
	$(MAKE) tables

# the claim register (docs/results/register.json, from the experiments' REGISTER and AMENDMENTS:
# a record is never dropped without an amendment that retires it), shown on docs/lab.md;
# the generated tables (docs/lab.md, the README), the forest plots and the report's picture
# (docs/img/report.png, rendered by headless Chromium: apt-get install chromium) from the
# committed results, each picture with a record of the results it was drawn from (PNG.json,
# tools/doc_pictures.py); and the counts the docs' prose states (tools/doc_values.py)
FULL_RESULTS = $(if $(wildcard docs/results/full.json),--full-results docs/results/full.json)
CHECK_RESULTS = $(if $(wildcard docs/results/quick-seed10000.json),\
	--check-results docs/results/quick-seed10000.json)
FULL_CHECK_RESULTS = $(if $(and $(FULL_RESULTS),$(wildcard docs/results/full-seed10000.json)),\
	--full-check-results docs/results/full-seed10000.json)
tables: $(VENV)/.installed
	$(BIN)/normlab report --write-register docs/results/register.json
	$(BIN)/normlab report --markdown --results docs/results/quick.json $(FULL_RESULTS) \
		$(CHECK_RESULTS) $(FULL_CHECK_RESULTS) --register docs/results/register.json \
		--forest docs/img/verdicts-quick.png --readme docs/lab.md README.md
	$(if $(FULL_RESULTS),$(BIN)/normlab report --markdown --results docs/results/full.json \
		--forest docs/img/verdicts-full.png > /dev/null)
	$(BIN)/python tools/doc_pictures.py stamp docs/img/verdicts-quick.png docs/results/quick.json
	$(if $(FULL_RESULTS),$(BIN)/python tools/doc_pictures.py stamp docs/img/verdicts-full.png \
		docs/results/full.json)
	$(BIN)/python tools/doc_pictures.py report
	$(BIN)/python tools/doc_pictures.py register
	$(BIN)/python tools/doc_values.py

FULL_OUT := normlab-results-full
FULL_FLAGS = --full $(if $(FRESH),--no-cache) $(if $(RAY),--ray $(RAY))

results-full: $(VENV)/.installed-lab
	mkdir -p docs/results
ifdef ONLY
	$(PORTABLE) $(BIN)/normlab report --out $(FULL_OUT) $(FULL_FLAGS) --only $(ONLY)
	if [ -f docs/results/full.json ]; then \
		$(BIN)/normlab report --merge $(FULL_OUT)/summary.json \
			--results docs/results/full.json; \
	else cp $(FULL_OUT)/summary.json docs/results/full.json; fi
else
	$(PORTABLE) $(BIN)/normlab report --out $(FULL_OUT) $(FULL_FLAGS)
	cp $(FULL_OUT)/summary.json docs/results/full.json
endif
	$(MAKE) tables

$(ORACLES)/.installed: pyproject.toml
	$(PYTHON) -m venv $(ORACLES)
	$(ORACLES)/bin/python -m pip install -e '.[conformance]'
	touch $@

conformance: $(VENV)/.installed $(ORACLES)/.installed
	$(BIN)/python benchmarks/conformance.py generate
	$(ORACLES)/bin/python benchmarks/conformance_tools.py
	$(BIN)/python benchmarks/conformance.py table

notebooks: $(VENV)/.installed
	$(BIN)/python -m nbconvert --to html --execute --ExecutePreprocessor.timeout=300 \
		--output-dir notebooks-html notebooks/*.ipynb

clean:
	rm -rf $(VENV) $(ORACLES) site build *.egg-info src/*.egg-info .pytest_cache .hypothesis notebooks-html
