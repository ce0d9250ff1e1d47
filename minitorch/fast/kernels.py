"""Chapter 3, exercises 3.1-3.11: kernels that Numba compiles to parallel machine code.

Every exercise here is a plain Python function over numpy arrays. The Numba
backend (``backend.py``) compiles whichever implementation the mode selects
(``exercises.implementation("3.k")``), so write only what Numba supports:
loops, arithmetic, ``numpy`` arrays, ``math`` and ``np.exp``-style calls, and
the index helpers of :mod:`minitorch.fast.indexing`. ``prange`` (from numba)
marks a loop whose iterations may run on different threads: each iteration
must write to its own part of ``out``.

Conventions: storages are 1-D arrays that start at the tensor's first
element (the backend has applied the offset); shapes and strides are int64
arrays; ``out`` is freshly allocated and contiguous unless said otherwise.
"""

from __future__ import annotations

from ..exercises import exercise


@exercise("3.1")
def tensor_map(fn, out, out_shape, out_strides, a, a_shape, a_strides):
    """Parallel strided map: ``out[i] = fn(a[broadcast(i)])`` for every index ``i`` of out.

    ``fn`` is a compiled scalar function. ``a_shape`` broadcasts to ``out_shape``.

    Two paths:
      * fast path: when ``a`` and ``out`` have the same shape and strides and are
        contiguous, element ``k`` of both sits at ``k``: ``for k in prange(size)``.
      * strided path: ``prange`` over *rows* (all dimensions but the last). Per row,
        compute the two start positions once with ``to_index``,
        ``broadcast_index`` and ``index_to_position`` (from
        ``minitorch.fast.indexing``; allocate the index arrays with
        ``np.empty(ndim, np.int64)`` once per row, outside the element loop), then walk the
        row by adding the last dimension's stride (0 where ``a`` is broadcast).

    Example: ``a`` of shape (3,) mapped into ``out`` of shape (2, 3) with
    ``fn = neg`` gives two rows of ``-a``.
    """
    raise NotImplementedError("Exercise 3.1: tensor_map")


@exercise("3.2")
def tensor_zip(fn, out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides):
    """Parallel strided zip: ``out[i] = fn(a[broadcast(i)], b[broadcast(i)])``.

    Same plan as :func:`tensor_map`, with two inputs: a contiguous fast path
    when all three have ``out``'s shape and contiguous strides, else rows in
    ``prange`` with the positions computed once per row.

    Example: ``a`` of shape (3, 1) and ``b`` of shape (4,) with ``fn = add``
    fill an ``out`` of shape (3, 4) with ``a[i, 0] + b[j]``.
    """
    raise NotImplementedError("Exercise 3.2: tensor_zip")


@exercise("3.3")
def tensor_reduce(fn, start, out, out_shape, out_strides, a, a_shape, a_strides, axis):
    """Parallel fold of dimension ``axis``: ``out[i] = fn(...fn(start, a[i, 0])..., a[i, n-1])``.

    ``out_shape`` is ``a_shape`` with a 1 at ``axis``. ``prange`` over the
    elements of ``out``; for each, find the start position in ``a`` once
    (its index has 0 at ``axis``), then step ``a_strides[axis]`` through the
    ``n = a_shape[axis]`` elements, folding into a local accumulator.

    Contiguous fast path: when ``a_strides[axis] == 1`` read ``a[p + j]``,
    a unit-stride loop the compiler can vectorise.

    Example: summing shape (2, 3) over axis 1 with ``fn = add``, ``start = 0``
    writes the two row sums into ``out`` of shape (2, 1).
    """
    raise NotImplementedError("Exercise 3.3: tensor_reduce")


@exercise("3.4")
def matmul_simple(out, a, b):
    """Batched matrix product ``out[bi] = a[bi] @ b[bi]`` on 3-D C-contiguous arrays, loop order first.

    ``out`` is (B, n, m); ``a`` is (B, n, k) or (1, n, k); ``b`` is (B, k, m)
    or (1, k, m): a batch of 1 broadcasts to every ``bi`` (the backend has
    already flattened and broadcast the batch dimensions). The backend uses
    this kernel for small products, where packing (3.6) costs more than it saves.

    No tiles, no packing: the point is the loop order. The textbook order
    (for ``i``, for ``j``, sum over ``k``) reads ``b[k, j]`` down a column, one
    cache line per multiply-add. Choose an order whose innermost loop walks
    ``out``, ``a`` and ``b`` at unit stride, so the compiler can vectorise it,
    and give each ``prange`` iteration its own rows of ``out``.
    Accumulate in ``out``'s dtype (a literal ``0.0`` is float64).

    Example: ``a = [[[1, 2], [3, 4]]]``, ``b = [[[1, 0], [0, 1]]]`` gives ``out = a``.
    """
    raise NotImplementedError("Exercise 3.4: matmul_simple")


@exercise("3.5")
def matmul_tile(out, a, bt, i, j, k0, k1):
    """The register-tile micro-kernel: add a 4 x 4 block of products into ``out``.

    ``out`` is (n, m), ``a`` is (n, k) and ``bt`` is ``b`` packed transposed,
    (m, k): row ``j`` of ``bt`` is column ``j`` of ``b``. Add, for ``r`` and
    ``c`` in 0..3, the partial dot product over ``k0 <= k < k1``::

        out[i + r, j + c] += sum_k a[i + r, k] * bt[j + c, k]

    and touch nothing else (the caller guarantees ``i + 4 <= n``, ``j + 4 <= m``).

    Hint (speed), why a tile: one pass over ``k`` for two rows of ``a`` and four of ``bt``
    loads 6 values for 8 multiply-adds, where a dot product loads 2 for each
    one. It pays only if the running sums stay in registers: keep
    them in 8 local scalars (a local array lives in memory), started from a
    zero of ``out``'s dtype (``np.zeros(1, out.dtype)[0]``; a float64 ``0.0``
    halves the values per vector instruction), write ``out`` once at the end,
    and do the tile as two such halves (rows ``i, i+1``, then ``i+2, i+3``).
    The compiler turns each scalar into a vector of sums along ``k``: 8 sums
    and 6 loaded vectors fit the 16 vector registers of an AVX2 processor,
    where 16 sums and 8 loads for all four rows at once would spill.

    Example: with ``out`` zero, ``a = ones((4, 8))``, ``bt = ones((4, 8))``,
    ``(i, j, k0, k1) = (0, 0, 2, 5)`` sets every ``out[r, c]`` to 3.
    """
    raise NotImplementedError("Exercise 3.5: matmul_tile")


@exercise("3.6")
def matmul(tile, out, a, b):
    """The fast batched matmul: pack, block for the caches, and call the tile (3.5).

    Shapes as in :func:`matmul_simple`. ``tile`` is the compiled
    :func:`matmul_tile` (yours or the reference): call
    ``tile(out[bi], a[ai], bt[bj], i, j, k0, k1)`` for every full 4 x 4 block.
    The graded benchmark wants a good fraction of one-thread BLAS.

    * pack: copy ``b`` transposed into ``bt`` of shape (b's batch, m, k), 16
      values of k at a time so each run of writes fills a cache line: every
      output element becomes a dot product of two contiguous rows;
    * cache blocks: ``prange`` over (batch, group of 64 rows); a group walks
      ``bt`` in panels of 128 columns by 1024 values of k that stay in L2,
      while each 4-row strip of ``a`` stays in L1 across the panel's columns.
      Zero ``out`` first: the tile adds each k-block's products;
    * edges: rows and columns left over from the 4 x 4 tiles take a plain dot
      product per element (over the same k-block).

    Example: as :func:`matmul_simple`; a (1, 5, 9) times (1, 9, 6) product
    uses one tile and dot products for the fifth row and last two columns.
    """
    raise NotImplementedError("Exercise 3.6: matmul")


@exercise("3.7")
def conv2d(out, x, w, stride, padding):
    """2-D convolution (cross-correlation, as in every DL framework), NCHW.

    ``x`` is (N, C, H, W), ``w`` is (O, C, KH, KW), ``out`` is (N, O, OH, OW) with
    ``OH = (H + 2 * padding - KH) // stride + 1`` (same for OW):
    ``out[n, o, oh, ow] = sum over c, kh, kw of
    w[o, c, kh, kw] * x[n, c, oh * stride - padding + kh, ow * stride - padding + kw]``,
    where positions outside ``x`` read 0 (zero padding).

    Hint: make the innermost loop long, contiguous and free of tests, which the
    compiler turns into vector code. Copy ``x`` once into a zero-padded buffer,
    each (n, c) plane flattened with rows of ``W + 2 * padding``: the window of
    weight ``(kh, kw)`` is then one contiguous run starting at
    ``kh * (W + 2 * padding) + kw``. ``prange`` over (n, o); for each weight add
    ``weight * run`` into a flat local output of the same row width, and read
    output ``(oh, ow)`` from position ``oh * stride * (W + 2 * padding) + ow * stride``.
    (A loop over the output plane that tests each position against the padding
    stays scalar: several times slower.)

    Example: a 1x1 kernel of weight 2 with stride 1, padding 0 doubles ``x``.
    """
    raise NotImplementedError("Exercise 3.7: conv2d")


@exercise("3.8")
def max_pool2d(out, x, kh, kw, sh, sw):
    """Max pooling: ``out[n, c, oh, ow] = max of x[n, c, oh*sh : oh*sh+kh, ow*sw : ow*sw+kw]``.

    ``x`` is (N, C, H, W); ``out`` is (N, C, OH, OW) with ``OH = (H - kh) // sh + 1``.
    A NaN in the window makes the result NaN (as ``numpy.max``).

    Example: a (1, 1, 2, 2) input ``[[1, 5], [3, 2]]`` with a 2x2 window gives ``[[5]]``.
    """
    raise NotImplementedError("Exercise 3.8: max_pool2d")


@exercise("3.9")
def avg_pool2d(out, x, kh, kw, sh, sw):
    """Average pooling: the mean of each ``kh x kw`` window, stepping ``sh``, ``sw``.

    Shapes as in :func:`max_pool2d`.

    Example: ``[[1, 5], [3, 2]]`` with a 2x2 window gives ``[[2.75]]``.
    """
    raise NotImplementedError("Exercise 3.9: avg_pool2d")


@exercise("3.10")
def softmax(out, x):
    """Row-wise softmax of a 2-D C-contiguous ``x`` into ``out`` (same shape), numerically stable.

    ``out[r, j] = exp(x[r, j] - m) / sum_j exp(x[r, j] - m)`` with ``m`` the
    row maximum: subtracting it changes nothing mathematically but keeps
    ``exp`` from overflowing (``exp(100.0)`` in float32 is ``inf``).
    The backend moved the softmax axis last; ``prange`` over rows.

    Example: ``[[1000.0, 1000.0]]`` gives ``[[0.5, 0.5]]`` (not nan).
    """
    raise NotImplementedError("Exercise 3.10: softmax")


@exercise("3.11")
def logsumexp(out, x):
    """Row-wise ``log(sum_j exp(x[r, j]))`` of a 2-D ``x`` into 1-D ``out``, numerically stable.

    Use ``m + log(sum_j exp(x[r, j] - m))`` with ``m`` the row maximum. A row
    whose maximum is ``-inf`` (all ``-inf``) gives ``-inf``; ``inf`` gives
    ``inf``; a NaN gives NaN.

    Example: ``[[1000.0, 1000.0]]`` gives ``[1000.6931]``.
    """
    raise NotImplementedError("Exercise 3.11: logsumexp")
