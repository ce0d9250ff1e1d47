"""``python -m autograder.tools.classroom build/results.json``: the points, as GitHub Classroom reads them.

Prints the base64 JSON that ``classroom-resources/autograding-grading-reporter``
reads from ``<RUNNER>_RESULTS`` (``.github/workflows/classroom.yml``): one test per
graded item with its score; the reporter adds them up, posts ``Points x/y`` on
the workflow's check run, and Classroom takes the grade from there. The run is
local grading in the learner's own repository: feedback, not a grade that
counts (see CONTRIBUTING.md).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path


def runner_results(results: dict) -> dict:
    tests = [{"name": t.get("name", "?"), "status": "pass" if t.get("status") == "passed" else "fail",
              "score": float(t.get("score", 0)), "max_score": float(t.get("max_score", 0)),
              "message": str(t.get("output", ""))[:500], "execution_time": "0"}
             for t in results.get("tests", [])]  # fmt: skip
    failed = any(t["status"] == "fail" for t in tests) or not tests
    return {"version": 1, "status": "fail" if failed else "pass",
            "max_score": float(results.get("max_score", 0)), "tests": tests}  # fmt: skip


def main(argv=None) -> int:
    path = Path((argv or sys.argv[1:] or ["build/results.json"])[0])
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        results = {"max_score": 0, "tests": []}
    print(base64.b64encode(json.dumps(runner_results(results)).encode()).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
