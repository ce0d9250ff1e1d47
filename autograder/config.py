"""The grader's limits and settings, in one place.

Read by the parent (``autograder/grader/``), the child (``harness``, ``plugin``,
``wire``) and the tooling (``autograder/tools/``); changing one here changes it
everywhere.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# --- time --------------------------------------------------------------------------
TEST_TIMEOUT = 90.0  # CPU seconds per graded test (--timeout)
BENCH_TIMEOUT = 240.0  # CPU seconds per benchmark
CHAPTER_TIMEOUT = 1200.0  # wall seconds for one chapter's graded tests
WALL_FACTOR = 3  # a test's wall-clock limit, in multiples of its CPU-time limit
LAB_TIMEOUT = 600.0  # wall seconds for one lab notebook
LAB_TASK_TIMEOUT = 240.0  # wall seconds for one lab task run alone
CELL_TIMEOUT = 300.0  # wall seconds for one notebook cell

# --- what travels from a child, and how much of it the parent keeps ---------------------
MESSAGE_LIMIT = 2000  # characters of a failure message
RECORD_LIMIT = 4 << 20  # bytes of one record line (two arrays of up to 64k elements)
RECORD_VOLUME = 64 << 20  # bytes of records one test or lab cell may send (largest: ~35 MiB)
CHECK_LIMIT = 100_000  # check records one test may send
SAMPLE = 1 << 12  # larger arrays travel as the same evenly spaced sample of both sides
TOL_CAP = 0.05  # a test asking for looser tolerances than this gets this
INPUTS_LIMIT = 600  # characters of a check's shown input
FLOOR = (1e-5, 1e-6)  # rtol, atol: recorded floats compared on another machine's numpy
LAB_RECORDS = 400  # comparison records kept per lab test cell
LAB_SAMPLE = 512  # array elements kept per lab record
LOG_TAIL = 64 << 10  # bytes of a child's log the parent reads (its last lines, for messages)

# --- the submission ------------------------------------------------------------------
MAX_FILES = 2000  # files under minitorch/
MAX_BYTES = 64 << 20  # all of them together
MAX_NOTEBOOK_BYTES = 16 << 20  # one lab notebook
MAX_ENTRIES = 20_000  # files and folders the grader looks at, in both folders together
MAX_DEPTH = 32  # folders below minitorch/ (or exercises/); deeper ones are left out
MAX_PATH = 1024  # characters of a path in the submission; longer ones are left out

# --- official grading: who runs learner code, and with what --------------------------------
# One user per run: minitorch-grader-0 ... -(GRADER_USERS - 1), created by setup.sh or by the
# first official run that takes one; a run holds its user alone (a lock file in GRADER_LOCKS).
GRADER_USER = "minitorch-grader"
GRADER_USERS = 8  # official runs at once on one machine; one more is refused
GRADER_LOCKS = "/run/minitorch-grader"
LIMITS = {  # rlimits of every child (soft = hard); CPU time is counted by the parent
    "RLIMIT_AS": 16 << 30,
    "RLIMIT_FSIZE": 256 << 20,
    "RLIMIT_CORE": 0,
    "RLIMIT_NOFILE": 1024,
}
OFFICIAL_NPROC = 512  # tasks (threads too) of the grading user; process creation is refused anyway
MAX_PROCESSES = 64  # local mode: more descendants than this at once and the parent kills them
SCRATCH_BYTES = 1 << 30  # the child's own /tmp, and a benchmark's fresh programs' /cache (tmpfs)

# --- benchmarks ----------------------------------------------------------------------
MIN_SAMPLE = 0.01  # CPU seconds a timed sample lasts at least (many calls of a fast side)
ONE_CALL = 0.005  # a side whose single call takes this long is timed one call per sample
OUTPUT_LIMIT = 1 << 30  # bytes of a benchmark side's result the parent reads and compares
