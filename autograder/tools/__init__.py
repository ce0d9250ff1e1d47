"""Tooling around the grader: hashes, the oracle's inputs, releases, Gradescope, Classroom."""
