# Two commands set everything up on a fresh machine with only Python:
#   make demo   the main job (creates .venv, installs normlab with the lab extra, runs it)
#   make test   the whole test suite (creates .venv, installs normlab with the test oracles, Ray,
#               the checkpoint readers and the notebook tooling; the companion notebooks are
#               executed too)
#   make notebooks   the companion notebooks executed and rendered to HTML in notebooks-html/
#   make results     the quick report from scratch; its summary committed as docs/results/quick.json
#                    and the README's lab table generated from it
#   make results ONLY=NAME   one experiment measured and merged into docs/results/quick.json and
#                    the README's table (a new experiment, or one whose rules changed)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test check bench notebooks results clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# demo: what the report runs (the lab extra), not the test oracles
$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[lab]'
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[lab,test,ray,hf,notebooks]'
	touch $@

demo: $(VENV)/.installed-lab
	$(BIN)/normlab report --out normlab-report

check: $(VENV)/.installed
	$(BIN)/normlab check

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed
	$(BIN)/normlab bench

results: $(VENV)/.installed-lab
ifdef ONLY
	$(BIN)/normlab report --out normlab-results-$(ONLY) --no-cache --only $(ONLY)
	$(BIN)/normlab report --merge normlab-results-$(ONLY)/summary.json --results docs/results/quick.json
else
	$(BIN)/normlab report --out normlab-results --no-cache
	mkdir -p docs/results
	cp normlab-results/summary.json docs/results/quick.json
endif
	$(BIN)/normlab report --markdown --results docs/results/quick.json --readme README.md

notebooks: $(VENV)/.installed
	$(BIN)/python -m nbconvert --to html --execute --ExecutePreprocessor.timeout=300 \
		--output-dir notebooks-html notebooks/*.ipynb

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .hypothesis notebooks-html
