"""Graded tests, chapter 8: the arena runner binding views (8.8), and planning the chapter's
models (MLP, CNN, attention) within 5% of the lower bound (8.4)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import minitorch
from autograder.harness import check, graded
from minitorch.memory import Buffer, bind_views, check_assignment, lower_bound

from .util import F32, MODELS, as_list, compile_program, compiled_model, programs

I64 = np.dtype("int64")


@graded("8.8", points=2)
def test_bind_views_share_the_arena():
    """
    contract: Its view must have exactly ``b.nbytes // itemsize`` elements of ``b.dtype``
    contract: share memory with the arena (no copy): a kernel writing into it writes into the arena
    contract: Only the buffer's own slot gets a view
    """
    arena = np.zeros(512, np.uint8)
    bs = [
        Buffer(3, 8, F32, 0, 1, [3], offset=64),
        Buffer(5, 24, I64, 0, 2, [5], offset=128),
        Buffer(7, 0, F32, 1, 2, [7], offset=0),
    ]
    views = bind_views(arena, bs)
    check(
        sorted(views) == [3, 5, 7],
        "8.8",
        "one view per buffer, by slot",
        value=sorted(views),
        got=sorted(views),
    )
    v, w = views[3], views[5]
    check(
        v.dtype == F32 and v.shape == (2,),
        "8.8",
        "2 float32 in 8 bytes",
        value=v.shape,
        got=(v.dtype, v.shape),
    )
    check(
        w.dtype == I64 and w.shape == (3,),
        "8.8",
        "3 int64 in 24 bytes",
        value=w.shape,
        got=(w.dtype, w.shape),
    )
    check(
        views[7].size == 0,
        "8.8",
        "an empty buffer gets an empty view",
        value=views[7].size,
        got=views[7].shape,
    )
    v[:] = [1.0, 2.0]
    w[:] = [5, 6, 7]
    check(
        np.array_equal(arena[64:72].view(F32), [1.0, 2.0]),
        "8.8",
        "writes through the view must land at its offset in the arena (no copy)",
        value=arena[64:72].view(F32),
    )
    check(
        np.array_equal(arena[128:152].view(I64), [5, 6, 7]),
        "8.8",
        "byte offsets, not elements",
        value=arena[128:152].view(I64),
    )
    check(
        not arena[72:128].any() and not arena[152:].any() and not arena[:64].any(),
        "8.8",
        "nothing outside the buffers' bytes is touched",
        value=arena,
    )
    # a buffer that took in-place results (slots 9, 11) and has a view (10): one view, for 9;
    # an empty buffer may sit at the very end of the arena
    # (and 2-byte elements: 3 float16 in 6 bytes)
    f16 = np.dtype("float16")
    bs = [Buffer(9, 64, F32, 0, 3, [9, 11], [10], offset=448), Buffer(12, 0, I64, 1, 2, [12], offset=512),
          Buffer(13, 6, f16, 0, 1, [13], offset=384)]  # fmt: skip
    views = bind_views(arena, bs)
    check(views[13].dtype == f16 and views[13].shape == (3,), "8.8", "3 float16 in 6 bytes",
          value=views[13].shape, got=(views[13].dtype, views[13].shape))  # fmt: skip
    check(sorted(views) == [9, 12, 13], "8.8", "only each buffer's own slot gets a view, not its "
          "other slots nor its views", value=sorted(views), got=sorted(views))  # fmt: skip
    check(views[12].size == 0 and views[12].dtype == I64, "8.8",
          "an empty buffer at the arena's end gets an empty int64 view", value=views[12].size)  # fmt: skip


@graded("8.8", points=3)
@settings(max_examples=30)
@given(programs())
def test_arena_runner_matches_plain_plan(prog):
    planned = compile_program(prog, memory=True)
    plain = compile_program(prog, memory=False)
    xs = [minitorch.tensor(a) for a in prog[1]]
    want = as_list(plain(*xs))
    got1 = planned(*xs)
    got2 = as_list(planned(*xs))  # a second call must not disturb what the first returned
    check(
        planned.runner.allocations == 2,
        "8.8",
        "each call must run in a fresh arena",
        value=planned.runner.allocations,
        allocations=planned.runner.allocations,
    )
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(as_list(got1), want))
    check(
        same,
        "8.8",
        "outputs differ with the arena",
        plan=planned.plan.text(),
        memory=planned.memory_plan().text(),
    )
    check(
        all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got2, want)),
        "8.8",
        "second call differs",
    )


@graded("8.8", points=2)
def test_arena_is_reused_and_outputs_never_alias_it():
    fn, inputs, _ = MODELS["mlp"](batch=8, width=32)
    from minitorch import CompileOptions
    from minitorch.tracing.tracer import trace_function

    g = trace_function(fn, [x.spec for x in inputs], name="mlp")
    c = g.compile(options=CompileOptions(memory=True, mode="reduce-overhead"))
    first = c(*inputs).numpy().copy()
    out1 = c(*inputs)
    out2 = c(*(x * 2.0 for x in inputs))
    runner = c.runner
    check(
        runner.allocations == 1,
        "8.8",
        "with keep, one arena for every call",
        value=runner.allocations,
        allocations=runner.allocations,
    )
    check(
        np.array_equal(out1.numpy(), first),
        "8.8",
        "an output changed when the next call ran: it aliases the arena",
    )
    arena = runner.arena
    check(not np.may_share_memory(out2._data.storage, arena), "8.8", "outputs must be copied out")
    want = fn(*(x * 2.0 for x in inputs)).numpy()
    check(np.allclose(out2.numpy(), want, rtol=1e-5, atol=1e-6), "8.8", "wrong answer")


@graded("8.4", points=3)
def test_models_within_five_percent_of_the_bound():
    for name in MODELS:
        fn, inputs, c = compiled_model(name)
        mp = c.memory_plan()
        bad = check_assignment(mp.buffers)
        check(not bad, "8.4", f"{name}: live buffers overlap", bad=bad)
        lb = lower_bound(mp.buffers)
        check(
            mp.arena_bytes <= 1.05 * lb,
            "8.4",
            f"{name}: arena over 1.05x the lower bound",
            value=[mp.arena_bytes, lb],
            arena=mp.arena_bytes,
            bound=lb,
        )
        got, want = as_list(c(*inputs)), as_list(fn(*inputs))
        check(
            all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(got, want)),
            "8.4",
            f"{name}: compiled with the arena differs from eager",
        )
