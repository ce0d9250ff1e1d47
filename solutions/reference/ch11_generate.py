"""Chapter 11 references, generation in a batch: prefill (11.15), generate_batch (11.16)."""

from __future__ import annotations

import numpy as np

from minitorch.core import creation
from minitorch.core.errors import OpError
from minitorch.core.registry import dispatch
from minitorch.core.tensor import Tensor, no_grad
from minitorch.nn.module import device_of
from minitorch.transformer.attention import attention
from minitorch.transformer.batched import prefill as _prefill_stub
from minitorch.transformer.generate import sample_next
from minitorch.transformer.model import empty_cache

__all__ = ["generate_batch", "prefill"]  # ch11.py re-exports these, not the imports

# ---------------------------------------------------------------- 11.15


def _check_chunk(model, ids, pos, cache):
    if ids.ndim != 3 or ids.shape[1] != 1 or ids.dtype != np.int64:
        raise OpError("prefill", f"ids must be int64 (B, 1, T), got {ids.dtype.name} {ids.shape}",
                      hint="one row per sequence: ids.reshape(B, 1, T).astype('int64')")  # fmt: skip
    if pos.shape != ids.shape:
        raise OpError("prefill", f"pos {pos.shape} must have ids' shape {ids.shape}",
                      hint="one position per token, per row")  # fmt: skip
    want = (ids.shape[0], model.heads, model.context, model.width // model.heads)
    if len(cache) != 2 * len(model.blocks) or any(c.shape != want for c in cache):
        raise OpError("prefill", f"cache {[c.shape for c in cache]} must be a key and a value "
                      f"{want} per block", hint=f"start from empty_cache(model, {ids.shape[0]})")  # fmt: skip
    return dispatch("index_check", pos, size=model.context, caller="prefill", what="pos",
                    hint=f"the cache has {model.context} slots: positions 0..{model.context - 1}")  # fmt: skip


def prefill(model, ids, pos, *cache):
    pos = _check_chunk(model, ids, pos, cache)
    (B, _, T), S = ids.shape, model.context
    slots = creation.arange(S, device=pos.device)
    hit = slots.reshape(S, 1) == pos.reshape(B, 1, 1, T)  # (B, 1, S, T): slot s takes token t
    written = hit.astype(np.int64).sum(axis=-1, keepdims=True) > 0  # (B, 1, S, 1)
    seen = slots <= pos.reshape(B, 1, T, 1)  # (B, 1, T, S): query t sees slot s
    x = model.tok(ids) + model.pos(pos)
    new = []
    for block, kc, vc in zip(model.blocks, cache[0::2], cache[1::2]):
        q, k, v = block.attn.project(block.ln1(x))
        place = hit.astype(k.dtype)
        kc = creation.where(written, place @ k, kc)
        vc = creation.where(written, place @ v, vc)
        x = x + block.attn.merge(attention(q, kc, vc, causal=False, key_mask=seen))
        x = x + block.mlp(block.ln2(x))
        new += [kc, vc]
    return (model.head(x), *new)


# ---------------------------------------------------------------- 11.16


def _fail(problem, hint):
    raise OpError("generate_batch", problem, hint=hint)


def _check_batch(model, prompts, n, seed, stop):
    if not isinstance(prompts, (list, tuple)) or not prompts:
        _fail(
            f"prompts must be a non-empty list of token lists, got {prompts!r}",
            hint="[[5, 3], [7]]",
        )
    for b, p in enumerate(prompts):
        if len(p) == 0:
            _fail(f"prompts[{b}] is empty", hint="every prompt needs at least one token")
        if min(p) < 0 or max(p) >= model.vocab:
            _fail(
                f"prompts[{b}] holds an id outside [0, {model.vocab})", hint="encode the text first"
            )
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        _fail(f"n must be an int >= 0, got {n!r}", hint="how many tokens to add to each prompt")
    longest = max(len(p) for p in prompts)
    if longest + n > model.context:
        _fail(f"the longest prompt ({longest} tokens) plus n={n} exceeds the context of "
              f"{model.context}", hint=f"at most n={model.context - longest}, or shorten the prompt")  # fmt: skip
    if isinstance(seed, (list, tuple)) and len(seed) != len(prompts):
        _fail(
            f"seed holds {len(seed)} seeds for {len(prompts)} prompts", hint="one seed per prompt"
        )
    if stop is not None and (
        isinstance(stop, bool) or not isinstance(stop, (int, np.integer))
        or not 0 <= stop < model.vocab
    ):  # fmt: skip
        _fail(f"stop must be None or an id in [0, {model.vocab}), got {stop!r}", hint="stop=None")


def generate_batch(model, prompts, n, temperature=1.0, top_k=None, seed=0, stop=None, step=None):
    _check_batch(model, prompts, n, seed, stop)
    step = step or (lambda ids, pos, *cache: _prefill_stub(model, ids, pos, *cache))
    B, lens = len(prompts), [len(p) for p in prompts]
    out = [[int(t) for t in p] for p in prompts]
    if n == 0:
        return out
    seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * B
    rngs = [np.random.default_rng(s) for s in seeds]
    ids = np.zeros((B, 1, max(lens)), np.int64)
    for b, p in enumerate(out):
        ids[b, 0, : len(p)] = p
    pos = np.zeros_like(ids) + np.arange(max(lens))

    def run(ids, pos, cache):  # the ids and positions go where the model is
        res = step(*(Tensor(a, device=device_of(model)) for a in (ids, pos)), *cache)
        return res[0].numpy()[:, 0], res[1:]

    ended = [False] * B
    with no_grad():
        logits, cache = run(ids, pos, empty_cache(model, B))
        logits = logits[np.arange(B), np.array(lens) - 1]  # each row's last prompt token
        while True:
            for b in range(B):
                if not ended[b]:
                    tok = sample_next(logits[b], temperature, top_k, float(rngs[b].random()))
                    out[b].append(tok)
                    ended[b] = tok == stop or len(out[b]) - lens[b] == n
            if all(ended):
                return out
            last = np.array([[[p[-1]]] for p in out], np.int64)
            at = np.array([[[len(p) - 1]] for p in out], np.int64)
            logits, cache = run(last, at, cache)
            logits = logits[:, 0]
