# minitorch: `make grade` for learners, `make check-solutions` for instructors, `make test` for CI.
# The first target that needs Python builds .venv from the pinned requirements.txt.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum requirements.txt pyproject.toml | cksum | cut -d' ' -f1)
PY     := $(BIN)/python

# make grade CH=1 | EX=1.3 | MODE=integrated
GRADE_ARGS := $(if $(CH),--chapter $(CH)) $(if $(EX),--exercise $(EX)) $(if $(filter integrated,$(MODE)),--integrated)

.PHONY: grade check-solutions check-starter mutants test pytest lint format book release release-check lab clean help

help:
	@echo "make grade            grade your work (CH=N one chapter, EX=C.N one exercise, MODE=integrated)"
	@echo "make check-solutions  grade the reference solutions: must be full marks (CH=N)"
	@echo "make mutants CH=N     grade the known-wrong implementations of chapter N: all must lose points"
	@echo "make test             everything CI runs"
	@echo "make book             build the Jupyter Book into book/_build/html"
	@echo "make release          regenerate exercises/ from solutions/notebooks/"
	@echo "make lab              open the lab notebooks in JupyterLab"

$(STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Setting up $(VENV) from requirements.txt (first run only, a few minutes)..."
	@mkdir -p build
	@( $(PY) -m pip install --upgrade pip && \
	   $(PY) -m pip install -r requirements.txt && \
	   $(PY) -m pip install --no-deps --no-build-isolation -e . ) > build/pip.log 2>&1 \
	   || { tail -30 build/pip.log; echo "pip failed: see build/pip.log"; exit 1; }
	@rm -f $(VENV)/.installed-* && touch $@

grade: $(STAMP)
	@$(PY) -m autograder $(GRADE_ARGS)

check-solutions: $(STAMP)
	@$(PY) -m autograder --solutions $(if $(CH),--chapter $(CH)) --json build/solutions.json

check-starter: $(STAMP)
	@$(PY) -m autograder --expect zero --json build/starter.json

mutants: $(STAMP)
	@test -n "$(CH)" || { echo "usage: make mutants CH=N"; exit 2; }
	@$(PY) -m tests.mutants $(CH)

pytest: $(STAMP)
	@$(PY) -m pytest tests

lint: $(STAMP)
	@$(BIN)/ruff check minitorch autograder solutions tests
	@$(BIN)/ruff format --check minitorch autograder solutions tests

format: $(STAMP)
	@$(BIN)/ruff check --fix minitorch autograder solutions tests
	@$(BIN)/ruff format minitorch autograder solutions tests

book: $(STAMP)
	@MINITORCH_MODE=reference MINITORCH_MODE_FIXED=1 $(BIN)/jupyter-book build book --warningiserror --keep-going

release: $(STAMP)
	@$(PY) -m autograder.release

release-check: $(STAMP)
	@$(PY) -m autograder.release --check

lab: $(STAMP)
	@$(BIN)/jupyter lab exercises

test: lint pytest check-solutions check-starter release-check book

clean:
	rm -rf build book/_build .pytest_cache .hypothesis
