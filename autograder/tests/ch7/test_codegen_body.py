"""Graded tests, chapter 7, exercise 7.7: a group's statements, one per op, formulas inlined."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch
from autograder.harness import assert_close, check, graded, text
from minitorch.core.registry import Spec
from minitorch.fusion import body_lines
from minitorch.tracing.tracer import trace_function

from .codegen_cases import F32, programs, python_function, traced


def _scalar_fn(graph, lines, names):
    args = [names[i] for i in graph.inputs]
    src = f"def f({', '.join(args)}):\n"
    src += "".join(f"    {line}\n" for line in lines)
    src += f"    return {names[graph.outputs[0]]}\n"
    return python_function(src, "f")


@graded("7.7", points=1)
def test_example_non_commutative_with_constant():
    """
    contract: those nodes keep their names and get no statement
    contract: Every other ``const`` is inlined
    """
    g = trace_function(lambda x, y: (x - y) * 2.0, [Spec((2,), F32), Spec((2,), F32)])
    names = {g.inputs[0]: "a0", g.inputs[1]: "a1"}
    lines = body_lines(g, names)
    check(len(lines) == 2, "7.7", "one statement per op", value=len(lines), lines=lines)
    f = _scalar_fn(g, lines, names)
    got = f(np.float32(5), np.float32(2))
    check(got == 6, "7.7", "(5 - 2) * 2 is 6", value=got, lines=lines)
    check(names[g.outputs[0]] != "a0", "7.7", "name every op's result in names", names=str(names))
    want = ["v0 = np.float32((a0 - a1))", "v1 = np.float32((v0 * np.float32(2.0)))"]
    check(lines == want, "7.7", "the docstring's example: op_expr per op, constants as "
          "literal(value, node.spec.dtype)", value=text(lines), want=text(want))  # fmt: skip
    vars_ = [line.split(" = ")[0] for line in lines]
    check(vars_ == ["v0", "v1"] and names[g.outputs[0]] == "v1", "7.7",
          "v<k>: k counts the statements so far", value=text(vars_), lines=lines)  # fmt: skip
    # a constant passed in as an input (already in names) keeps its name: no literal
    (c,) = g.constants
    names = {g.inputs[0]: "a0", g.inputs[1]: "a1", c: "a2"}
    lines = body_lines(g, names)
    check(names[c] == "a2" and "a2" in lines[-1] and "2.0" not in "".join(lines), "7.7",
          "a constant in names is read from its variable, not inlined", value=text(lines), lines=lines)  # fmt: skip


@graded("7.7", points=3)
@settings(max_examples=30)
@given(programs(), st.data())
def test_statements_compute_the_program(prog, data):
    """
    contract: Return the statements; afterwards the output element is ``names[graph.outputs[0]]``
    """
    steps, in_shapes = prog
    g, fn = traced(steps, [()] * len(in_shapes))  # 0-d: one element per input
    names = {n: f"a{k}" for k, n in enumerate(g.inputs)}
    lines = body_lines(g, names)
    check(all(isinstance(s, str) for s in lines), "7.7", "return a list of statements")
    f = _scalar_fn(g, lines, names)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for _ in range(3):
        xs = [np.float32(v) for v in rng.standard_normal(len(in_shapes)) * 2]
        with np.errstate(all="ignore"):
            got = f(*xs)
            want = fn(*(minitorch.tensor(np.array(x, dtype=np.float32)) for x in xs)).numpy()
        assert_close(np.float32(got), want, "7.7", rtol=1e-5, atol=1e-5, steps=steps, lines=lines)
