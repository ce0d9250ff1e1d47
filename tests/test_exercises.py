"""Every exercise has a stub that only raises, a reference with the same signature, and a graded test."""

import ast
import importlib
import inspect
import textwrap

import pytest

import minitorch  # noqa: F401  (registers every exercise)
from autograder.grader import manifest
from minitorch import exercises

FOUND = manifest.exercises()  # read from the source: chapters 3 and 4 load lazily
for _info in FOUND.values():
    importlib.import_module(_info.path.removesuffix(".py").replace("/", "."))
IDS = sorted(FOUND, key=manifest.exercise_sort_key)


def test_every_chapter_with_tests_has_exercises():
    chapters = {exercises.REGISTRY[i].chapter for i in IDS}
    for ch in manifest.chapters():
        if manifest.graded_items(ch):
            assert ch in chapters, f"chapter {ch} has graded tests but no exercises"


@pytest.mark.parametrize("ex_id", IDS)
def test_reference_has_the_stub_signature(ex_id):
    ex = exercises.REGISTRY[ex_id]
    ref = ex.reference()
    assert _params(ref) == _params(ex.stub), (
        f"Exercise {ex_id}: reference {inspect.signature(ref)} != stub {inspect.signature(ex.stub)}"
    )


def _params(fn):
    """Names, kinds and defaults (annotations may differ)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("ex_id", IDS)
def test_stub_only_raises_with_its_id(ex_id):
    stub = exercises.REGISTRY[ex_id].stub
    tree = ast.parse(textwrap.dedent(inspect.getsource(stub)))
    body = tree.body[0].body
    doc, rest = body[0], body[1:]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant), (
        f"Exercise {ex_id}: the stub needs a docstring stating the task"
    )
    assert len(doc.value.value.split()) >= 15, f"Exercise {ex_id}: the docstring is too thin"
    assert len(rest) == 1 and isinstance(rest[0], ast.Raise), (
        f"Exercise {ex_id}: the stub body must be only `raise NotImplementedError(...)`"
    )
    call = rest[0].exc
    assert call.func.id == "NotImplementedError", ex_id
    assert call.args[0].value.startswith(f"Exercise {ex_id}:"), (
        f"Exercise {ex_id}: the message must start with 'Exercise {ex_id}:'"
    )


def test_every_exercise_is_graded():
    graded = {i.exercise for ch in manifest.chapters() for i in manifest.graded_items(ch)}
    missing = [i for i in IDS if i not in graded]
    assert not missing, f"exercises without a graded test: {missing}"
    unknown = sorted(graded - set(IDS))
    assert not unknown, f"graded tests name unknown exercises: {unknown}"


def test_manifest_finds_the_same_exercises_as_the_package():
    assert set(exercises.REGISTRY) == set(IDS)


def test_modes_switch_implementations():
    ex_id = IDS[0]
    ex = exercises.REGISTRY[ex_id]
    old = exercises.get_mode()
    try:
        exercises.set_mode("learner")
        assert exercises.implementation(ex_id) is ex.stub
        exercises.set_mode("isolated", focus=str(ex.chapter))
        assert exercises.implementation(ex_id) is ex.stub
        exercises.set_mode("isolated", focus="99")
        assert exercises.implementation(ex_id) is ex.reference()
        with exercises.focus(ex_id):
            assert exercises.implementation(ex_id) is ex.stub
        exercises.set_mode("reference")
        assert exercises.implementation(ex_id) is ex.reference()
        with pytest.raises(ValueError, match="unknown mode"):
            exercises.set_mode("everything")
    finally:
        exercises.set_mode(old[0], ",".join(old[1]))
