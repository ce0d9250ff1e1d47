"""Chapter 12 in official grading: the ranks of its graded tests are threads in the child's
sandbox, which starts no processes (so a learner's code cannot start ranks of its own)."""

import os

import pytest

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="official grading needs root")

MPIEXEC_RING = """

def ring_allreduce(comm, buf):  # starts real MPI ranks from inside the graded child
    from minitorch.distributed import run

    run(2, "minitorch.distributed.measure:compare", {"sizes": [1]}, timeout=10)
    return buf.copy()
"""


@ROOT_ONLY
def test_official_grading_runs_the_ring_on_thread_ranks_and_refuses_mpiexec(tmp_path):
    from tests.install_references import install
    from tests.test_grader_hostile import grade

    sub = tmp_path / "sub"
    install(sub)
    data = grade(sub, "--exercise", "12.2", "--no-notebooks")
    assert data["score"] == data["max_score"] == 8, [
        (t["name"], t["status"]) for t in data["tests"]
    ]
    ring = sub / "minitorch/distributed/ring.py"
    ring.write_text(ring.read_text() + MPIEXEC_RING)  # the later definition wins
    data = grade(sub, "--exercise", "12.2", "--no-notebooks")
    assert data["score"] == 0 and data["max_score"] == 8
    assert all(t["status"] != "passed" for t in data["tests"])
