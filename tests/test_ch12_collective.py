"""Chapter 12's all_reduce op and the compiled step's collectives stage, on one rank (no
mpiexec: the world is this process, so an all-reduce gives its input back)."""

import numpy as np
import pytest

import minitorch as mt
from minitorch import OpError, nn
from minitorch.distributed import collective


@pytest.fixture(autouse=True)
def _reference():
    mode, focus = mt.get_mode()
    mt.set_mode("reference")
    yield
    mt.set_mode(mode, focus)  # as the session had it


def _step(buckets_of, debug=False):
    m = nn.mlp([8, 16, 4], seed=0)
    opt = nn.SGD(m, lr=0.1)
    buckets = buckets_of(list(m.parameters())[::-1])

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        collective.reduce_gradients(buckets)
        opt.step()
        return loss

    rng = np.random.default_rng(0)
    x, y = (
        mt.tensor(rng.standard_normal((5, 8)).astype(np.float32)),
        mt.tensor(rng.integers(0, 4, 5)),
    )
    return m, step, x, y


def test_one_rank_all_reduce_is_the_input_and_its_gradient_too():
    x = mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = mt.dispatch("all_reduce", x)
    assert np.array_equal(y.numpy(), x.numpy())
    (y * 3.0).sum().backward()
    assert np.array_equal(x.grad.numpy(), np.full((2, 3), 3.0))
    with pytest.raises(OpError, match="all_reduce: x is int64") as e:
        mt.dispatch("all_reduce", mt.tensor(np.arange(3)))
    assert "float32 or float64" in e.value.hint


def test_compiled_step_splits_and_schedules_each_bucket():
    m, step, x, y = _step(lambda ps: [ps[:2], ps[2:]])
    m2, step2, _, _ = _step(lambda ps: [ps[:2], ps[2:]])
    c = mt.compile(step)
    for _ in range(2):  # within float32: without chapter 12 too, this step's first
        # compiled call differs from eager's in its loss's last bit (a chapter-9 matter)
        assert c(x, y).item() == pytest.approx(step2(x, y).item(), rel=1e-6)
    assert all(np.allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
               for a, b in zip(m.parameters(), m2.parameters()))  # fmt: skip
    unit = list(c.entries.values())[-1].compiled.unit
    g = unit.graph
    pos = {n: i for i, n in enumerate(g.nodes)}
    starts = [n for n in g.nodes if n.op == "all_reduce_start"]
    waits = [n for n in g.nodes if n.op == "all_reduce_wait"]
    assert len(starts) == len(waits) == 2 and not any(n.op == "all_reduce" for n in g.nodes)
    assert all(pos[s] == max(pos[i] for i in s.inputs) + 1 for s in starts)
    assert all(pos[w] + 1 == min(pos[u] for u in w.users) for w in waits)
    # the first bucket is issued while the backward still computes the second's gradients
    assert pos[starts[0]] < max(pos[i] for i in starts[1].inputs)
    # the plan runs the steps in the graph's order: the schedule is the plan's
    plan = list(c.entries.values())[-1].compiled.plan
    assert [st.node for st in plan.steps] == [n for n in g.nodes if n.op not in ("input", "const")]
    lines = collective.schedule_lines(g, unit.collectives)
    assert lines[0].startswith("Collectives: 2 all-reduce bucket(s)")
    assert "bucket 0:" in lines[1] and "issued at node" in lines[1] and "waited at" in lines[1]


def test_debug_compile_verifies_the_split_graph():
    from minitorch.compile.step import CompiledStep

    _, step, x, y = _step(lambda ps: [[p] for p in ps])
    s = CompiledStep(step, mt.CompileOptions(), debug=True)  # verify after every stage
    s(x, y)
    graph = list(s.entries.values())[-1].compiled.unit.graph
    assert sum(n.op == "all_reduce_wait" for n in graph.nodes) == 4


def test_left_out_without_the_exercise_still_reduces():
    _, step, x, y = _step(lambda ps: [ps])
    mt.set_mode("isolated", focus="12.6")  # the stub: the stage is left out
    c = mt.compile(step)
    c(x, y)
    unit = list(c.entries.values())[-1].compiled.unit
    assert "12.6" in unit.skipped["collectives"]
    assert any(n.op == "all_reduce" for n in unit.graph.nodes)


def test_a_wait_without_its_start_is_named():
    kernel = collective._wait_kernel(None, "numpy")
    with pytest.raises(OpError, match="all_reduce_wait: no all-reduce in flight under tag 7"):
        kernel(None, out=None, tag=7)


def test_the_thread_pool_is_refused_for_a_data_parallel_step():
    from minitorch.compile.step import CompiledStep

    _, step, x, y = _step(lambda ps: [ps])
    with pytest.raises(OpError, match="collectives: a step with all-reduces cannot run") as e:
        CompiledStep(step, mt.CompileOptions(parallel=True))(x, y)
    assert "without parallel=True" in e.value.hint
