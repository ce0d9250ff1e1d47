"""Generation: an eager Python sampling loop (exercise 11.7) around a decode step.

The loop is Python on purpose: choosing a token (temperature, top-k, a random
draw), stopping, and sliding the window when the cache is full are decisions on
values, which a graph would need ``cond`` or a graph break for. The decode step
is the part worth compiling: its shapes never change (a cache of ``context``
slots, the position as a tensor), so it is traced once and replayed for every
token.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import OpError  # noqa: F401  (what exercise 11.7 raises)
from ..core.tensor import Tensor, no_grad
from ..exercises import exercise
from ..nn.module import device_of
from .model import TinyGPT, decode_step, empty_cache


@exercise("11.7")
def sample_next(logits: np.ndarray, temperature: float, top_k, u: float) -> int:
    """The next token id drawn from ``logits`` (1-D, one per token) with the uniform number ``u``.

    * ``temperature == 0``: greedy, the index of the largest logit (the first
      one on ties); ``u`` is ignored;
    * otherwise divide the logits by ``temperature``; with ``top_k`` (an int),
      keep the ``top_k`` largest (ties at the boundary: the lower index first)
      and give every other token probability 0; ``top_k=None`` keeps all;
    * softmax over the kept tokens (subtract their maximum first), then return
      the smallest index ``i`` whose cumulative probability
      ``p[0] + ... + p[i]`` exceeds ``u`` (the last kept token if rounding
      leaves the total just below ``u``).

    Raise ``OpError("sample_next", problem, hint)`` when ``logits`` is not 1-D
    and non-empty, ``temperature`` is negative, ``top_k`` is not None or a
    positive int, or ``u`` lies outside ``[0, 1)``; the problem names the argument
    (``logits``' shape).

    Example:
        >>> sample_next(np.log(np.array([0.5, 0.25, 0.25])), 1.0, None, 0.6)
        1
        >>> sample_next(np.array([1.0, 3.0, 2.0]), 1.0, 1, 0.99)   # top-1 is greedy
        1
    """
    raise NotImplementedError("Exercise 11.7: sample_next")


def _ids(tokens, device: str = "cpu") -> Tensor:
    return Tensor(np.asarray(tokens, np.int64).reshape(1, 1, -1), device=device)


def generate(model: TinyGPT, prompt, n: int, temperature=1.0, top_k=None, seed=0, step=None):
    """``prompt`` (token ids) followed by ``n`` sampled ids; ``step`` defaults to eager ``decode_step``.

    When the ``context`` slots are full, the cache restarts from the last half of
    the text (a Python decision between steps).
    """
    step = step or (lambda tok, pos, *cache: decode_step(model, tok, pos, *cache))
    rng = np.random.default_rng(seed)
    tokens = list(int(t) for t in prompt)
    cache, fed, start, logits = empty_cache(model), 0, 0, None
    device = device_of(model)  # the ids go where the model is
    with no_grad():
        while len(tokens) < len(prompt) + n:
            while start + fed < len(tokens):  # feed what the cache has not seen
                if fed == model.context:  # full: start over from the recent half
                    start, fed = len(tokens) - model.context // 2, 0
                    cache = empty_cache(model)
                out = step(_ids([tokens[start + fed]], device), _ids([fed], device), *cache)
                logits, cache = out[0], list(out[1:])
                fed += 1
            u = float(rng.random())
            tokens.append(sample_next(logits.numpy().reshape(-1), temperature, top_k, u))
    return tokens


def greedy_full(forward, prompt, n: int, context: int):
    """Greedy ids from a full forward pass over the growing text (``forward(ids, pos) -> logits``).

    No cache: the reference that the cached decoder and onnxruntime must both match.
    """
    tokens = list(int(t) for t in prompt)
    for _ in range(n):
        window = tokens[-context:]
        ids, pos = np.array(window).reshape(1, 1, -1), np.arange(len(window)).reshape(1, 1, -1)
        logits = np.asarray(forward(ids.astype(np.int64), pos.astype(np.int64)))
        tokens.append(int(np.argmax(logits.reshape(len(window), -1)[-1])))
    return tokens
