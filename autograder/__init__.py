"""The grader: graded tests per chapter, benchmarks, lab notebooks, and the report (see __main__)."""
