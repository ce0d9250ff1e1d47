# minitorch: `make grade` for learners, `make check-solutions` for instructors, `make test` for CI.
# The first target that needs Python builds .venv from the pinned requirements.txt.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum requirements.txt pyproject.toml | cksum | cut -d' ' -f1)
PY     := $(BIN)/python

# make grade CH=1 | EX=1.3 | MODE=integrated
GRADE_ARGS := $(if $(CH),--chapter $(CH)) $(if $(EX),--exercise $(EX)) $(if $(filter integrated,$(MODE)),--integrated)

.PHONY: help grade lint format lab check-gpu clean

help:
	@echo "make grade            grade your work (CH=N one chapter, EX=C.N one exercise, MODE=integrated)"
	@echo "make lab              open the lab notebooks in JupyterLab"
	@echo "make check-gpu        with an NVIDIA GPU: check driver, CUDA and packages, run the GPU tests"
# instructors: begin
	@echo "make book             build the Jupyter Book into book/_build/html"
	@echo "make grade-submission SUB=dir   official grading of a submission folder (as root)"
	@echo "make check-solutions  grade the reference solutions: must be full marks (CH=N)"
	@echo "make check-installed  the references installed as a learner's answers, graded as learners are"
	@echo "make mutants CH=N     grade the known-wrong implementations of chapter N: all must lose points"
	@echo "make mutation CH=N    generated mutants of chapter N's references (EX=C.N, SAMPLE=n)"
	@echo "make test             everything CI runs"
	@echo "make load-test        every chapter's benchmarks on the reference beside two busy processes"
	@echo "make bench-gpu        issue 42's table: the cuda device against PyTorch (ARGS=\"--quick --json F\")"
	@echo "make release          regenerate exercises/ from solutions/notebooks/"
	@echo "make hashes           record the grader's files in autograder/hashes.json after a change"
	@echo "make oracle           record the references' comparisons (after a change to tests or references)"
	@echo "make gradescope       build/gradescope.zip: the Gradescope autograder"
	@echo "make student-release  build/student/: the learner repository (CHAPTERS=1-4: references released)"
# instructors: end

$(STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Setting up $(VENV) from requirements.txt (first run only): pip installs about 150 pinned"
	@echo "packages, usually 2-5 minutes. A progress line every 15 s; full log in build/pip.log."
	@mkdir -p build
	@( $(PY) -m pip install --upgrade pip && \
	   $(PY) -m pip install -r requirements.txt && \
	   $(PY) -m pip install --no-deps --no-build-isolation -e . ) > build/pip.log 2>&1 & pid=$$!; \
	 start=$$(date +%s); \
	 while kill -0 $$pid 2>/dev/null; do sleep 15; kill -0 $$pid 2>/dev/null || break; \
	   echo "  [$$(( $$(date +%s) - start )) s] $$(grep -E '^(Collecting|Processing|Downloading|Installing|Building|Successfully)' build/pip.log | tail -1 | cut -c1-70)"; done; \
	 wait $$pid || { tail -30 build/pip.log; echo "pip failed: see build/pip.log"; exit 1; }
	@echo "$(VENV) is ready."
	@rm -f $(VENV)/.installed-* && touch $@

grade: $(STAMP)
	@$(PY) -m autograder $(GRADE_ARGS)

lint: $(STAMP)
	@$(BIN)/ruff check $(wildcard minitorch autograder solutions tests)
	@$(BIN)/ruff format --check $(wildcard minitorch autograder solutions tests)

format: $(STAMP)
	@$(BIN)/ruff check --fix $(wildcard minitorch autograder solutions tests)
	@$(BIN)/ruff format $(wildcard minitorch autograder solutions tests)

# JupyterLab refuses to run as root unless told to (containers often run as root).
lab: $(STAMP)
	@$(BIN)/jupyter lab exercises $(if $(filter 0,$(shell id -u)),--allow-root)

# Exit status 0 only when kernels run on the GPU and the graded GPU tests pass (1 without a GPU).
check-gpu: $(STAMP)
	@$(PY) -m minitorch.cuda.check

clean:
	rm -rf build book/_build .pytest_cache .hypothesis

# instructors: begin (make student-release drops from here to "instructors: end")
.PHONY: grade-submission check-solutions check-installed check-starter load-test bench-gpu hashes oracle gradescope student-release mutants mutation test pytest book release release-check

# Official grading of a submission folder (its minitorch/ and exercises/), as Gradescope grades:
# learner code runs as an unprivileged user in a world of its own. Needs root (sudo).
grade-submission: $(STAMP)
	@test -n "$(SUB)" || { echo "usage: make grade-submission SUB=path/to/submission"; exit 2; }
	@$(PY) -m autograder --official --submission $(SUB) $(GRADE_ARGS) --json $(or $(JSON),build/results.json)

check-solutions: $(STAMP)
	@$(PY) -m autograder --solutions $(if $(CH),--chapter $(CH)) --json build/solutions.json

# The references copied into the stubs and the lab answer cells, graded the way learners are
# (one child per exercise, labs included): correct code must keep full marks.
check-installed: $(STAMP)
	@$(PY) -m tests.install_references build/installed
	@$(PY) -m autograder --submission build/installed --expect full --json build/installed.json $(if $(CH),--chapter $(CH))

check-starter: $(STAMP)
	@$(PY) -m autograder --expect zero --json build/starter.json

# After an intended change to the grader, its tests or the references: record their hashes.
hashes: $(STAMP)
	@$(PY) -m autograder.tools.integrity --write

# After a change to the graded tests or the references: record the references' comparisons
# (autograder/oracle.json.gz, the expected values the grader compares with), then the hashes.
oracle: $(STAMP)
	@$(PY) -m autograder --record-oracle --json build/oracle-run.json
	@$(PY) -m autograder.tools.integrity --write

# build/student/: the learner repository; CHAPTERS=1-4 also releases those chapters' references.
student-release: $(STAMP)
	@$(PY) -m autograder.tools.student_release --out build/student $(if $(CHAPTERS),--chapters $(CHAPTERS))

# build/gradescope.zip: upload as the assignment's autograder (see CONTRIBUTING.md, class use).
gradescope: $(STAMP)
	@$(PY) -m autograder.tools.gradescope --out build/gradescope.zip

mutants: $(STAMP)
	@test -n "$(CH)" || { echo "usage: make mutants CH=N"; exit 2; }
	@$(PY) -m tests.mutants $(CH)

# mutmut's operators applied to the references, each mutant graded like a learner's code.
mutation: $(STAMP)
	@test -n "$(CH)" || { echo "usage: make mutation CH=N [EX=C.N] [SAMPLE=n] [PER=n]"; exit 2; }
	@$(PY) -m tests.mutation $(CH) $(if $(EX),--exercise $(EX)) $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(PER),--per-exercise $(PER))

pytest: $(STAMP)
	@$(PY) -m pytest tests

load-test: $(STAMP)
	@MINITORCH_LOAD_TEST=full $(PY) -m pytest tests/test_load.py -k under_load -s

# The references on the cuda device (the simulator without a GPU: use ARGS=--quick there).
bench-gpu: $(STAMP)
	@MINITORCH_MODE=reference $(PY) -m minitorch.cuda.bench $(ARGS)

book: $(STAMP)
	@MINITORCH_MODE=reference MINITORCH_MODE_FIXED=1 $(BIN)/jupyter-book build book --warningiserror --keep-going

release: $(STAMP)
	@$(PY) -m autograder.tools.release

release-check: $(STAMP)
	@$(PY) -m autograder.tools.release --check

test: lint pytest check-solutions check-installed check-starter release-check book
# instructors: end
