"""Generation in a batch: the prompt in one prefill pass, then cached decode (11.15, 11.16).

``generate`` (generate.py) feeds a prompt through ``decode_step`` one token at a
time: one small step per prompt token. ``prefill`` writes a whole chunk of
tokens into the key/value cache in one pass, and a decode step is the same call
with a chunk of one token, so a single function serves both. Positions are per
row, which is what lets prompts of different lengths share one batch.
"""

from __future__ import annotations

from ..core.errors import OpError  # noqa: F401  (what exercises 11.15, 11.16 raise)
from ..core.tensor import Tensor
from ..exercises import exercise
from .model import TinyGPT


@exercise("11.15")
def prefill(model: TinyGPT, ids: Tensor, pos: Tensor, *cache: Tensor):
    """Run a chunk of tokens through ``model`` with a key/value cache; returns ``(logits, *new_cache)``.

    ``ids`` and ``pos`` are int64 ``(B, 1, T)``: token ``t`` of row ``b`` is
    ``ids[b, 0, t]`` and takes position (and cache slot) ``pos[b, 0, t]``; a
    row's positions are distinct. ``cache`` is ``empty_cache(model, B)``'s layout,
    ``[K0, V0, K1, V1, ...]``, each ``(B, H, context, D)``.

    * each layer writes every token's key and value into its row's slot
      ``pos[b, 0, t]``; every other slot of the new cache keeps its old value;
    * a token at position ``p`` attends over its row's slots ``0 .. p`` after
      the write (earlier calls' tokens and this chunk's up to ``p``), never a
      slot after ``p``;
    * the logits are ``(B, 1, T, vocab)``; prefilling a whole sequence at
      positions ``0 .. T-1`` from an empty cache gives the same logits as
      ``model(ids, positions)`` (within float rounding), and so does any split
      of it into chunks fed one after another, one-token decode steps included.

    Shapes never depend on values, so a compiled ``prefill`` traces once per ``T``.
    Use only ``block.attn.project``, ``block.attn.merge``, ``block.ln1``, ``block.ln2``,
    ``block.mlp``, ``model.tok``, ``model.pos``, ``model.head`` and ``attention``.

    Raise ``OpError("prefill", problem, hint)`` when ``ids`` is not 3-D with a
    middle dim of 1 or not int64, when ``pos``' shape is not ``ids``' shape,
    when ``cache`` does not hold two tensors per block, each ``(B, H, context, D)``,
    and when a position lies outside ``[0, context)``; the problem names the
    argument (``ids``, ``pos`` or ``cache``).

    Hint:
        Writing at positions held in a tensor (not Python ints) is a comparison
        of the slot numbers (an ``arange``) with ``pos``; ``where`` or a matmul
        with the 0/1 result puts the new rows in place. The same kind of
        comparison gives the ``key_mask`` of ``attention`` (``causal=False``: the
        mask already says what each query sees).

    Hint:
        Lay the two comparisons out so that they broadcast against the cache
        ``(B, H, slots, D)`` and the scores ``(B, H, T, slots)``: one dim of
        size 1 where the heads go. A position check that is a step of the graph
        already exists: ``dispatch("index_check", ...)`` (see ``TinyGPT.forward``).

    Example:
        >>> cache = empty_cache(model, 1)
        >>> out = prefill(model, ids, pos, *cache)          # ids, pos (1, 1, 5): positions 0..4
        >>> out[0].shape, len(out) == 1 + len(cache)
        ((1, 1, 5, vocab), True)
    """
    raise NotImplementedError("Exercise 11.15: prefill")


@exercise("11.16")
def generate_batch(model: TinyGPT, prompts, n: int, temperature=1.0, top_k=None, seed=0,
                   stop=None, step=None):  # fmt: skip
    """Each prompt of ``prompts`` (lists of token ids, any lengths) followed by up to ``n``
    sampled ids, all prompts in one batch; returns a new list of lists of ints.

    * right padding: the prompts go into one ``(B, 1, T)`` int64 batch, ``T`` the
      longest prompt, each row's tokens first, then pad id 0; the positions
      are ``0 .. T-1`` in every row; one ``step(ids, pos, *empty_cache(model, B))``
      call reads the whole batch (the prefill);
    * each row's next token comes from the logits at its own last prompt token,
      then from each decode step: ``step`` on a ``(B, 1, 1)`` batch of every
      row's last token at its own position (the row's length so far minus 1);
    * every row draws its tokens with ``sample_next(logits, temperature, top_k, u)``,
      ``u`` drawn from the row's own ``np.random.default_rng(seed)`` (``seed`` is an
      int for every row or a list of one per row), one draw per token; so
      each row equals ``generate(model, prompt, n, temperature,
      top_k, seed)`` for that prompt alone;
    * stopping: a row ends after ``n`` new tokens or right after it draws
      ``stop`` (kept in its output); the loop ends when every row has ended,
      and calls ``step`` no more than it needs (never after the last draw).

    ``step`` defaults to ``prefill`` (11.15) on ``model``; another (a compiled
    one) must take and return what ``prefill`` does.

    Raise ``OpError("generate_batch", problem, hint)`` when ``prompts`` is empty,
    holds an empty prompt or an id outside ``[0, vocab)``; when ``n`` is not an
    int >= 0 or a prompt plus ``n`` tokens exceeds the ``context``; when ``seed``
    is a list whose length is not the number of prompts; when ``stop`` is not
    None or an id of the vocabulary; the problem names the argument.

    Hint:
        Keep each row's tokens in a Python list and its state (ended or not,
        its generator) beside it; only the cache and the logits are tensors.
        Rows that ended may still ride along in the batch: feed them anything
        valid and ignore what comes back.

    Hint:
        The logits of the prefill are ``(B, 1, T, vocab)``: a row's next token
        comes from its own column, not the last one. After the prefill a
        row's next position is the number of tokens it holds minus one.

    Example:
        >>> generate_batch(model, [[5, 3], [7]], 2, temperature=0)   # greedy
        [[5, 3, 9, 9], [7, 2, 4]]
    """
    raise NotImplementedError("Exercise 11.16: generate_batch")
