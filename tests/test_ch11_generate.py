"""Chapter 11's batched generation (11.15, 11.16) with a compiled step and on the cuda device."""

from __future__ import annotations

import minitorch.cuda  # noqa: F401  (chooses the simulator before numba.cuda loads)
from minitorch.tracing.jit import jit
from minitorch.transformer import TinyGPT, generate, generate_batch, prefill


def _model():
    return TinyGPT(11, context=12, width=8, heads=2, layers=2, seed=3)


def test_a_compiled_step_traces_once_per_chunk_length():
    model = _model()
    step = jit(lambda ids, pos, *cache: prefill(model, ids, pos, *cache))
    prompts = [[1, 2, 3], [4], [5, 6]]
    kw = dict(temperature=0.9, top_k=4, seed=[7, 8, 9])
    eager = generate_batch(model, prompts, 5, **kw)
    assert generate_batch(model, prompts, 5, step=step, **kw) == eager
    assert step.trace_count == 2  # the prefill (T=3) and every decode step (T=1)
    longer = [[1, 2, 3, 4, 5], [6], [7]]
    assert generate_batch(model, longer, 5, step=step, **kw) == generate_batch(
        model, longer, 5, **kw
    )
    assert step.trace_count == 3  # a longer prompt is a new chunk length; decode is reused


def test_on_the_cuda_device_the_same_tokens():
    model = _model()
    prompts = [[1, 2, 3], [4]]
    cpu = generate_batch(model, prompts, 2, temperature=0)
    assert cpu == [generate(model, p, 2, temperature=0) for p in prompts]
    assert generate_batch(model.to("cuda"), prompts, 2, temperature=0) == cpu
