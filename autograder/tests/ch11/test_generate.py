"""Graded tests, chapter 11: the prompt in one prefill pass (11.15) and prompts of different
lengths generated in one batch (11.16).

The answers are computed another way: the full model on the whole text (no cache), and
chapter 11's ``generate``, which feeds one prompt at a time token by token through
``decode_step``.
"""

from __future__ import annotations

import re
import types

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.harness import assert_close, check, graded, text
from minitorch import OpError
from minitorch.core.tensor import Tensor, no_grad
from minitorch.nn.module import Parameter
from minitorch.tracing.jit import jit
from minitorch.transformer import (
    TinyGPT,
    attention,
    empty_cache,
    generate,
    generate_batch,
    prefill,
)

VOCAB, CONTEXT = 13, 8


def _model(seed=0, context=CONTEXT):
    return TinyGPT(VOCAB, context=context, width=8, heads=2, layers=2, seed=seed)


def _t(a) -> Tensor:
    return Tensor(np.asarray(a))


def _full(model, ids):
    """The full model on ``ids`` (B, 1, T) at positions 0..T-1: logits and each layer's keys and
    values (what the cache's first T slots must hold)."""
    T = ids.shape[-1]
    with no_grad():
        x = model.tok(_t(ids)) + model.pos(_t(np.arange(T).reshape(1, 1, T)))
        kv = []
        for block in model.blocks:  # a pre-norm block, written out (the model's is 11.9's)
            q, k, v = block.attn.project(block.ln1(x))
            kv += [k.numpy(), v.numpy()]
            x = x + block.attn.merge(attention(q, k, v, causal=True))
            x = x + block.mlp(block.ln2(x))
        return model.head(x).numpy(), kv


def _raises(fn, *words) -> tuple[bool, str, str]:
    """Whether ``fn`` raises an OpError of op ``words[0]`` whose problem names every other word
    (as a word), with a hint; its message; its op."""
    try:
        fn()
    except OpError as e:
        if not e.hint:
            return False, f"{e} (no hint: the contract raises OpError(op, problem, hint))", e.op
        named = all(
            re.search(rf"(?<![\w.]){re.escape(w)}(?![\w])", str(e.problem)) for w in words[1:]
        )
        return e.op == words[0] and named, str(e), e.op
    except Exception as e:  # noqa: BLE001 - the wrong kind of error
        return False, f"{type(e).__name__}: {e}", ""
    return False, "no error", ""


def _ids(rng, B, T):
    return rng.integers(0, VOCAB, (B, 1, T)).astype(np.int64)


def _positions(B, T, start=0):
    return np.broadcast_to(np.arange(start, start + T, dtype=np.int64), (B, 1, T)).copy()


# ---------------------------------------------------------------- 11.15 prefill


@graded("11.15", points=2)
@settings(max_examples=12)
@given(B=st.integers(1, 3), T=st.integers(1, CONTEXT), seed=st.integers(0, 3),
       dirt=st.sampled_from([np.nan, np.inf, -np.inf, 1e30, -0.0]), shuffled=st.booleans())  # fmt: skip
def test_prefill_whole_sequence_equals_the_model(B, T, seed, dirt, shuffled):
    """contract: Run a chunk of tokens through ``model`` with a key/value cache
    contract: gives the same logits as
    contract: a row's positions are distinct
    Shuffled: each row's tokens come in another order, each with its own position.
    contract: each layer writes every token's key and value into its row's slot
    contract: every other slot of the new cache keeps its old value
    """
    model, rng = _model(seed), np.random.default_rng(seed)
    ids = _ids(rng, B, T)
    want, kv = _full(model, ids)
    # the slots this pass writes hold garbage (overwritten, never read); the others 1e30 and
    # finite noise, which only a cache that is kept and masked leaves out of the logits
    old = []
    for _ in kv:
        c = rng.normal(size=(B, 2, CONTEXT, 4)).astype(np.float32)
        c[:, :, :T], c[:, :, T::2] = dirt, 1e30
        old.append(c)
    pos = _positions(B, T)
    if shuffled:
        pos = np.stack([rng.permutation(T) for _ in range(B)]).reshape(B, 1, T)
    fed = np.take_along_axis(ids, pos, axis=-1)  # token t of a row sits at position pos[b, 0, t]
    with no_grad():
        out = prefill(model, _t(fed), _t(pos), *[_t(c) for c in old])
    check(len(out) == 1 + len(old), "11.15", "returns (logits, *new_cache)", value=len(out))
    want = np.take_along_axis(want, pos[..., None], axis=2)
    assert_close(out[0].numpy(), want, "11.15", rtol=1e-4, atol=1e-5, ids=fed, pos=pos)
    for layer, (c, k, o) in enumerate(zip(out[1:], kv, old)):
        got = c.numpy()
        assert_close(got[:, :, :T], k, "11.15", rtol=1e-5, atol=1e-6, cache=layer, part="written")
        kept = bool(np.array_equal(got[:, :, T:], o[:, :, T:], equal_nan=True))
        check(kept, "11.15", f"cache {layer}: the slots after {T} keep their old values",
              value=kept, T=T)  # fmt: skip


@graded("11.15", points=2)
@settings(max_examples=12)
@given(data=st.data())
def test_prefill_in_chunks_then_decode(data):
    """contract: and so does any split
    contract: never a slot after
    """
    T = data.draw(st.integers(2, CONTEXT), label="T")
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), max_size=T - 1), label="cuts"))
    model, rng = _model(1), np.random.default_rng(T)
    ids = _ids(rng, 2, T)
    want, kv = _full(model, ids)
    cache = [_t(np.full((2, 2, CONTEXT, 4), 1e30 * (-1) ** i, np.float32)) for i in range(4)]
    got = []
    with no_grad():
        for a, b in zip([0, *cuts], [*cuts, T]):
            out = prefill(model, _t(ids[..., a:b]), _t(_positions(2, b - a, a)), *cache)
            got.append(out[0].numpy())
            cache = out[1:]
    assert_close(np.concatenate(got, axis=2), want, "11.15", rtol=1e-4, atol=1e-5, cuts=cuts)
    for layer, (c, k) in enumerate(zip(cache, kv)):
        assert_close(c.numpy()[:, :, :T], k, "11.15", rtol=1e-5, atol=1e-6, cache=layer, cuts=cuts)


@graded("11.15", points=2)
@settings(max_examples=10)
@given(
    lengths=st.lists(st.integers(1, CONTEXT - 1), min_size=2, max_size=4), seed=st.integers(0, 2)
)
def test_prefill_per_row_positions(lengths, seed):
    """contract: takes position (and cache slot)
    contract: a token at position ``p`` attends over its row's slots ``0 .. p``
    Right-padded rows of different lengths, then one-token steps at each row's own position,
    up to the last slot: each row's logits are the full model's on that row alone.
    """
    model, rng = _model(seed), np.random.default_rng(seed)
    B, T = len(lengths), max(lengths)
    seqs = [rng.integers(0, VOCAB, CONTEXT) for _ in lengths]
    ids = np.zeros((B, 1, T), np.int64)
    for b, n in enumerate(lengths):
        ids[b, 0, :n] = seqs[b][:n]
    with no_grad():
        out = prefill(model, _t(ids), _t(_positions(B, T)), *empty_cache(model, B))
        rows = [[out[0].numpy()[b, 0, n - 1]] for b, n in enumerate(lengths)]
        cache = out[1:]
        for step in range(CONTEXT - min(lengths)):
            at = np.array([min(n + step, CONTEXT - 1) for n in lengths]).reshape(B, 1, 1)
            tok = np.array([seqs[b][at[b, 0, 0]] for b in range(B)]).reshape(B, 1, 1)
            out = prefill(model, _t(tok), _t(at), *cache)
            cache = out[1:]
            for b, n in enumerate(lengths):
                if n + step <= CONTEXT - 1:
                    rows[b].append(out[0].numpy()[b, 0, 0])
    for b, n in enumerate(lengths):
        want = _full(model, np.asarray(seqs[b]).reshape(1, 1, -1))[0][0, 0, n - 1 :]
        assert_close(np.stack(rows[b]), want, "11.15", rtol=1e-4, atol=1e-5, row=b, lengths=lengths)


def _fused(model):
    """The model with each block's q, k, v weights fused into one (H, C, 3D) parameter: a
    prefill that uses only ``block.attn.project`` keeps working."""
    for block in model.blocks:
        a = block.attn
        if not all(hasattr(a, w) for w in ("wq", "wk", "wv")):
            continue  # the model's own projection is fused already
        a.wqkv = Parameter(np.concatenate([a.wq.numpy(), a.wk.numpy(), a.wv.numpy()], axis=-1))
        del a.wq, a.wk, a.wv

        def project(self, h):
            qkv, d = h @ self.wqkv, self.wqkv.shape[-1] // 3
            return qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]

        a.project = types.MethodType(project, a)
    return model


@graded("11.15", points=1)
def test_prefill_uses_only_the_blocks_interface_and_traces_once():
    """contract: Use only ``block.attn.project``, ``block.attn.merge``
    contract: Shapes never depend on values, so a compiled ``prefill`` traces once per ``T``.
    """
    model, rng = _fused(_model(2)), np.random.default_rng(2)
    ids = _ids(rng, 2, 5)
    want, _ = _full(model, ids)
    step = jit(lambda i, p, *c: prefill(model, i, p, *c))
    with no_grad():
        out = step(_t(ids), _t(_positions(2, 5)), *empty_cache(model, 2))
        assert_close(out[0].numpy(), want, "11.15", rtol=1e-4, atol=1e-5, model="fused qkv")
        logits = []
        for k in range(3):  # one token at another position each time: one trace
            tok, at = ids[..., k : k + 1], np.full((2, 1, 1), 5 + k, np.int64)
            logits.append(step(_t(tok), _t(at), *out[1:])[0].numpy())
            eager = prefill(model, _t(tok), _t(at), *out[1:])[0].numpy()
            assert_close(logits[-1], eager, "11.15", rtol=1e-5, atol=1e-6, compiled_step=k)
    check(step.trace_count == 2, "11.15", "one trace for T=5, one for T=1", value=step.trace_count)


@graded("11.15", points=1)
def test_prefill_errors():
    """contract: Raise ``OpError("prefill", problem, hint)``"""
    model = _model()
    cache = empty_cache(model, 2)
    ids, pos = _t(np.zeros((2, 1, 3), np.int64)), _t(_positions(2, 3))

    def z(shape):  # int64 zeros: the shape is what is wrong
        return np.zeros(shape, np.int64)

    cases = [
        (lambda: prefill(model, _t(z((2, 3))), _t(z((2, 3))), *cache), ("prefill", "ids")),
        (lambda: prefill(model, _t(z((2, 1))), _t(z((2, 1))), *cache), ("prefill", "ids")),
        (lambda: prefill(model, _t(z((2, 2, 3))), _t(z((2, 2, 3))), *cache), ("prefill", "ids")),
        (lambda: prefill(model, _t(np.zeros((2, 1, 3))), pos, *cache), ("prefill", "ids")),
        (lambda: prefill(model, ids, _t(_positions(2, 4)), *cache), ("prefill", "pos")),
        (lambda: prefill(model, ids, _t(_positions(1, 3)), *cache), ("prefill", "pos")),
        (lambda: prefill(model, ids, pos, *cache[:3]), ("prefill", "cache")),
        (lambda: prefill(model, ids, pos, *empty_cache(model, 1)), ("prefill", "cache")),
        (lambda: prefill(model, ids, _t(_positions(2, 3, -1)), *cache), ("prefill", "pos")),
        (lambda: prefill(model, ids, _t(_positions(2, 3, 6)), *cache), ("prefill", "pos")),  # 8
    ]
    for k, (fn, words) in enumerate(cases):
        with no_grad():
            ok, msg, op = _raises(fn, *words)
        check(ok, "11.15", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)
    with no_grad():  # the last slot is a valid position
        out = prefill(model, ids, _t(_positions(2, 3, CONTEXT - 3)), *cache)
    check(out[0].shape == (2, 1, 3, VOCAB), "11.15", "positions up to context - 1",
          value=text(out[0].shape))  # fmt: skip


# ---------------------------------------------------------------- 11.16 generate_batch


def _alone(model, prompts, n, temperature=0.0, top_k=None, seeds=None, stop=None):
    """Each prompt by itself, fed token by token through ``decode_step`` (``generate``), cut
    after the first ``stop`` among its new tokens."""
    out = []
    for b, p in enumerate(prompts):
        toks = generate(model, p, n, temperature, top_k, seed=0 if seeds is None else seeds[b])
        new = toks[len(p) :]
        if stop in new:
            new = new[: new.index(stop) + 1]
        out.append(list(p) + new)
    return out


_prompts = st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6), min_size=1,
                    max_size=4)  # fmt: skip


@graded("11.16", points=2)
@settings(max_examples=10)
@given(prompts=_prompts, n=st.integers(1, 4), seed=st.integers(0, 2))
def test_generate_batch_greedy_equals_each_prompt_alone(prompts, n, seed):
    """contract: each row's next token comes from the logits at its own last prompt token
    contract: so each row equals
    """
    model = _model(seed, context=10)
    got = generate_batch(model, prompts, n, temperature=0)
    want = _alone(model, prompts, n)
    check(got == want, "11.16", "greedy, every row", value=text(got), expected=want, n=n)


@graded("11.16", points=2)
@settings(max_examples=10)
@given(prompts=_prompts, n=st.integers(1, 4), temperature=st.sampled_from([0.5, 1.0, 3.0]),
       top_k=st.sampled_from([None, 1, 3]), seeds=st.lists(st.integers(0, 99), min_size=4, max_size=4))  # fmt: skip
def test_generate_batch_sampled_equals_each_prompt_alone(prompts, n, temperature, top_k, seeds):
    """contract: ``u`` drawn from the row's own ``np.random.default_rng(seed)``
    contract: an int for every row or a list of one per row
    """
    model = _model(3, context=10)
    seeds = seeds[: len(prompts)]
    got = generate_batch(model, prompts, n, temperature, top_k, seed=seeds)
    want = _alone(model, prompts, n, temperature, top_k, seeds)
    check(got == want, "11.16", "one seed per row", value=text(got), expected=want)
    got = generate_batch(model, prompts, n, temperature, top_k, seed=seeds[0])
    want = _alone(model, prompts, n, temperature, top_k, [seeds[0]] * len(prompts))
    check(got == want, "11.16", "one seed for every row", value=text(got), expected=want)


@graded("11.16", points=1)
def test_generate_batch_one_prefill_then_batched_steps():
    """contract: one ``step(ids, pos, *empty_cache(model, B))`` call reads the whole batch
    contract: another (a compiled one) must take and return what ``prefill`` does
    contract: never after the last draw
    """
    model, calls = _model(4), []

    def step(ids, pos, *cache):
        calls.append((ids.numpy().tolist(), pos.numpy().tolist(), [c.shape for c in cache]))
        return prefill(model, ids, pos, *cache)

    prompts = [[3, 1, 4], [1], [5, 9, 2, 6, 5]]
    got = generate_batch(model, prompts, 3, temperature=0, step=step)
    check(got == _alone(model, prompts, 3), "11.16", "the tokens", value=text(got))
    first = ([[[3, 1, 4, 0, 0]], [[1, 0, 0, 0, 0]], [[5, 9, 2, 6, 5]]], [[[0, 1, 2, 3, 4]]] * 3,
             [(3, 2, CONTEXT, 4)] * 4)  # fmt: skip
    check(calls[0] == first, "11.16", "the prefill: right-padded with 0, positions 0..T-1",
          value=text(calls[0]), expected=first)  # fmt: skip
    later = [c[1] for c in calls[1:]]
    want = [[[[3 + k]], [[1 + k]], [[5 + k]]] for k in range(2)]
    check(later == want, "11.16", "then (B, 1, 1) steps at each row's own position, 3 tokens = "
          "1 prefill + 2 steps", value=text(later), expected=want)  # fmt: skip
    fed = [[row[0][0] for row in c[0]] for c in calls[1:]]
    want_fed = [[g[len(p) + k] for g, p in zip(got, prompts)] for k in range(2)]
    check(fed == want_fed, "11.16", "each step feeds every row's last token", value=text(fed))


@graded("11.16", points=1)
def test_generate_batch_stop_and_edges():
    """contract: returns a new list of lists of ints
    contract: right after it draws ``stop`` (kept in its output)
    contract: the loop ends when every row has ended
    """
    model = _model(5)
    prompts = [[2, 7], [4, 4, 4, 4], [11]]
    free = _alone(model, prompts, 4)
    stop = free[0][3]  # the second token row 0 would draw
    got = generate_batch(model, prompts, 4, temperature=0, stop=stop)
    want = _alone(model, prompts, 4, stop=stop)
    check(got == want, "11.16", f"stop={stop}: a row ends after it", value=text(got), expected=want)
    every = generate_batch(model, [[2, 7], [2, 7]], 4, temperature=0, stop=free[0][2])
    check(every == [free[0][:3]] * 2, "11.16", "every row stops at once", value=text(every))
    same = generate_batch(model, prompts, 0)
    check(same == prompts and all(a is not b for a, b in zip(same, prompts)), "11.16",
          "n=0: the prompts, as new lists", value=text(same))  # fmt: skip
    plain = generate_batch(model, prompts, 4)  # the defaults: temperature 1, seed 0, as generate's
    want = _alone(model, prompts, 4, 1.0, None, [0] * 3)
    check(plain == want, "11.16", "the defaults", value=text(plain), expected=want)
    zero = generate_batch(model, prompts, 4, temperature=0, stop=0)  # id 0 is a valid stop
    check(zero == _alone(model, prompts, 4, stop=0), "11.16", "stop=0", value=text(zero))
    full = generate_batch(model, [[1, 2, 3]], CONTEXT - 3, temperature=0)  # fills the context
    check(full == _alone(model, [[1, 2, 3]], CONTEXT - 3), "11.16", "a prompt plus n == context",
          value=text(full))  # fmt: skip
    kinds = {type(t).__name__ for row in got + full for t in row}
    check(kinds == {"int"}, "11.16", "plain ints", value=text(sorted(kinds)))
    check(prompts == [[2, 7], [4, 4, 4, 4], [11]], "11.16", "the prompts are left as they were",
          value=text(prompts))  # fmt: skip


@graded("11.16", points=1)
def test_generate_batch_errors():
    """contract: Raise ``OpError("generate_batch", problem, hint)``"""
    m = _model()
    cases = [
        (lambda: generate_batch(m, [], 2), ("generate_batch", "prompts")),
        (lambda: generate_batch(m, [[1], []], 2), ("generate_batch", "prompts[1]")),
        (lambda: generate_batch(m, [[1, VOCAB]], 2), ("generate_batch", "prompts[0]")),
        (lambda: generate_batch(m, [[1, -1]], 2), ("generate_batch", "prompts[0]")),
        (lambda: generate_batch(m, [[1]], -1), ("generate_batch", "n")),
        (lambda: generate_batch(m, [[1]], 2.0), ("generate_batch", "n")),
        (lambda: generate_batch(m, [[1], [1, 2, 3]], CONTEXT - 2), ("generate_batch", "n")),
        (lambda: generate_batch(m, [[1], [2]], 2, seed=[1]), ("generate_batch", "seed")),
        (lambda: generate_batch(m, [[1]], 2, stop=VOCAB), ("generate_batch", "stop")),
        (lambda: generate_batch(m, [[1]], 2, stop=-1), ("generate_batch", "stop")),
        (lambda: generate_batch(m, [[1]], 2, stop=1.0), ("generate_batch", "stop")),
    ]
    for k, (fn, words) in enumerate(cases):
        ok, msg, op = _raises(fn, *words)
        check(ok, "11.16", f"case {k} must raise OpError naming {words}", value=text(op), got=msg)
