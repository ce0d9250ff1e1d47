"""Chapter 11 (generate) known-wrong implementations: prefill (11.15), generate_batch (11.16)."""

from __future__ import annotations

import numpy as np

from minitorch.core import creation
from minitorch.core.tensor import Tensor, no_grad
from minitorch.transformer.attention import attention
from minitorch.transformer.batched import prefill as prefill_exercise
from minitorch.transformer.generate import sample_next
from minitorch.transformer.model import empty_cache
from solutions.reference import ch11_generate as ref

from . import mutant

# ---------------------------------------------------------------- 11.15 prefill


def _prefill(model, ids, pos, *cache, sees=lambda s, p: s <= p, rows=True, keep=True,
             blend=False, check=True):  # fmt: skip
    B, _, T = ids.shape
    S = model.context
    if check:
        pos = ref._check_chunk(model, ids, pos, cache)
    p = pos if rows else pos[0:1] + pos * 0  # row 0's positions in every row
    slots = creation.arange(S, device=pos.device)
    hit = slots.reshape(1, 1, S, 1) == p.reshape(B, 1, 1, T)
    written = hit.astype(np.int64).sum(axis=-1, keepdims=True) > 0
    seen = sees(slots.reshape(1, 1, 1, S), p.reshape(B, 1, T, 1))
    x = model.tok(ids) + model.pos(pos)
    new = []
    for block, kc, vc in zip(model.blocks, cache[0::2], cache[1::2]):
        q, k, v = block.attn.project(block.ln1(x))
        place = hit.astype(k.dtype)
        if blend:
            keep_old = 1.0 - written.astype(k.dtype)
            kc, vc = kc * keep_old + place @ k, vc * keep_old + place @ v
        elif keep:
            kc, vc = creation.where(written, place @ k, kc), creation.where(written, place @ v, vc)
        else:
            kc, vc = place @ k, place @ v
        x = x + block.attn.merge(attention(q, kc, vc, causal=False, key_mask=seen))
        x = x + block.mlp(block.ln2(x))
        new += [kc, vc]
    return (model.head(x), *new)


@mutant("11.15", "a token does not see its own slot (< for <=)")
def prefill_strict(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, sees=lambda s, p: s < p)


@mutant("11.15", "row 0's positions for every row")
def prefill_shared_positions(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, rows=False)


@mutant("11.15", "the slots this chunk does not write are zeroed: earlier chunks lost")
def prefill_cache_not_kept(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, keep=False)


@mutant("11.15", "the write as old * (1 - hit) + new: an inf or NaN in a written slot stays")
def prefill_blended_write(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, blend=True)


@mutant("11.15", "every slot is seen by every query: the later slots and the chunk's future")
def prefill_sees_all(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, sees=lambda s, p: s + p * 0 >= 0)


@mutant("11.15", "no check of the shapes and positions: another op's error, or none")
def prefill_unchecked(model, ids, pos, *cache):
    return _prefill(model, ids, pos, *cache, check=False)


@mutant("11.15", "the positions read as numpy values: a Python decision, one trace per value")
def prefill_python_positions(model, ids, pos, *cache):
    fixed = Tensor(pos.numpy().copy())  # the values now: a constant to the tracer
    return _prefill(model, ids, fixed, *cache)


# ---------------------------------------------------------------- 11.16 generate_batch


def _gen(model, prompts, n, temperature, top_k, seed, stop, step, *, own_last=True, rngs=None,
         left=False, keep_stop=True, at=lambda p: len(p) - 1, check=True):  # fmt: skip
    if check:
        ref._check_batch(model, prompts, n, seed, stop)
    step = step or (lambda i, p, *c: prefill_exercise(model, i, p, *c))
    B, lens = len(prompts), [len(p) for p in prompts]
    out = [[int(t) for t in p] for p in prompts]
    if n == 0:
        return out
    seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * B
    rngs = rngs or [np.random.default_rng(s) for s in seeds]
    rngs = rngs if len(rngs) == B else rngs * B
    T = max(lens)
    ids = np.zeros((B, 1, T), np.int64)
    for b, p in enumerate(out):
        if left:
            ids[b, 0, T - len(p) :] = p
        else:
            ids[b, 0, : len(p)] = p
    pos = np.broadcast_to(np.arange(T, dtype=np.int64), ids.shape).copy()
    ended = [False] * B
    with no_grad():
        res = step(Tensor(ids), Tensor(pos), *empty_cache(model, B))
        cols = np.array([T - 1] * B if (left or not own_last) else [n_ - 1 for n_ in lens])
        logits, cache = res[0].numpy()[np.arange(B), 0, cols], res[1:]
        while True:
            for b in range(B):
                if not ended[b]:
                    tok = sample_next(logits[b], temperature, top_k, float(rngs[b].random()))
                    if tok != stop or keep_stop:
                        out[b].append(tok)
                    ended[b] = tok == stop or len(out[b]) - lens[b] == n
            if all(ended):
                return out
            last = np.array([[[p[-1]]] for p in out], np.int64)
            where = np.array([[[min(at(p), model.context - 1)]] for p in out], np.int64)
            res = step(Tensor(last), Tensor(where), *cache)
            logits, cache = res[0].numpy()[:, 0, 0], res[1:]


@mutant("11.16", "every row's first token from the batch's last column, not its own last token")
def generate_batch_last_column(model, prompts, n, temperature=1.0, top_k=None, seed=0,
                               stop=None, step=None):  # fmt: skip
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step, own_last=False)


@mutant("11.16", "one generator shared by every row")
def generate_batch_one_rng(model, prompts, n, temperature=1.0, top_k=None, seed=0, stop=None,
                           step=None):  # fmt: skip
    first = seed[0] if isinstance(seed, (list, tuple)) else seed
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step,
                rngs=[np.random.default_rng(first)])  # fmt: skip


@mutant("11.16", "left padding with positions 0..T-1: a short row's tokens at the wrong positions")
def generate_batch_left_padded(model, prompts, n, temperature=1.0, top_k=None, seed=0,
                               stop=None, step=None):  # fmt: skip
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step, left=True)


@mutant("11.16", "the stop token ends the row but is left out of it")
def generate_batch_drops_stop(model, prompts, n, temperature=1.0, top_k=None, seed=0, stop=None,
                              step=None):  # fmt: skip
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step, keep_stop=False)


@mutant("11.16", "a decode step at the row's length, one past its last token")
def generate_batch_position_plus_one(model, prompts, n, temperature=1.0, top_k=None, seed=0,
                                     stop=None, step=None):  # fmt: skip
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step, at=len)


@mutant("11.16", "no checks: the context overflow surfaces as prefill's error")
def generate_batch_unchecked(model, prompts, n, temperature=1.0, top_k=None, seed=0, stop=None,
                             step=None):  # fmt: skip
    return _gen(model, prompts, n, temperature, top_k, seed, stop, step, check=False)


@mutant("11.16", "the prompts fed token by token, one step each: no prefill pass")
def generate_batch_token_by_token(model, prompts, n, temperature=1.0, top_k=None, seed=0,
                                  stop=None, step=None):  # fmt: skip
    ref._check_batch(model, prompts, n, seed, stop)
    step = step or (lambda i, p, *c: prefill_exercise(model, i, p, *c))
    out = [[int(t) for t in p] for p in prompts]
    if n == 0:
        return out
    seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * len(prompts)
    with no_grad():
        for b, p in enumerate(prompts):
            rng, cache = np.random.default_rng(seeds[b]), empty_cache(model, 1)
            for k in range(len(p) + n - 1):
                res = step(Tensor(np.array([[[out[b][k]]]])), Tensor(np.array([[[k]]])), *cache)
                cache = res[1:]
                if k >= len(p) - 1:
                    tok = sample_next(res[0].numpy().reshape(-1), temperature, top_k, rng.random())
                    out[b].append(tok)
                    if tok == stop:
                        break
    return out
