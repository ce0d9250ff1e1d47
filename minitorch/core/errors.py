"""One error type that names the op, what went wrong and what would work."""

from __future__ import annotations


class OpError(ValueError):
    """Bad input to an op. ``str(e)`` reads: ``op: problem. Hint: what would work``."""

    def __init__(self, op: str, problem: str, hint: str | None = None):
        self.op, self.problem, self.hint = op, problem, hint
        msg = f"{op}: {problem}"
        if hint:
            msg += f". Hint: {hint}"
        super().__init__(msg)
