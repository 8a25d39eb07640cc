"""Threads for numpy work: `set_num_threads` (like `torch.set_num_threads`), `map_chunks` and `split_rows`.

Written by hand (given code, explained in module 07's "Two cores" section); learners never write it.

numpy runs each ufunc call (`a * b`, `np.exp(a)`) on one core. It does release Python's GIL while it
loops over the elements, so two Python threads, each running the same ufuncs on its own half of the
rows, really run on two cores at once. `map_chunks(work, n)` splits `range(n)` into one contiguous
chunk per thread, runs `work(start, stop)` for each on a small pool (the calling thread takes the
first chunk) and waits for all of them. Below `MIN_ELEMENTS` it calls `work(0, n)` directly: handing
a chunk to a thread costs tens of microseconds, more than a small array saves.

`split_rows(function)` applies the same idea to a whole autograd Function whose rows are independent
(Linear, GELU, softmax, LayerNorm, attention over a batch): each thread runs the Function's own
forward, and later its backward, on its chunk of the rows.

One knob, `set_num_threads(n)`, sets both this pool and the BLAS threads of numpy's matrix products
(through threadpoolctl). Work started inside a chunk stays on that chunk's thread, a matrix product
included: while chunks run, BLAS is set to one thread. Otherwise OpenBLAS's own threads, which keep
spinning for a while after each product in case another follows, would take the cores the chunks
need. The default is 1 thread for the pool (nothing changes until you ask for more).
"""
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

__all__ = ["set_num_threads", "get_num_threads", "map_chunks", "split_rows", "MIN_ELEMENTS", "MIN_ELEMENTS_LIGHT",
           "CACHE_BLOCK_ELEMENTS"]

MIN_ELEMENTS = 1 << 16
MIN_ELEMENTS_LIGHT = 1 << 20  # for split_rows of light, memory-bound Functions (see there)
_state = {"threads": 1, "pool": None, "blas": None}
_lock = threading.Lock()
_chunk = threading.local()  # .running: this thread runs a chunk already, so nested work stays on it


def _level2_cache_bytes(base="/sys/devices/system/cpu/cpu0/cache"):
    """A core's level-2 cache, in bytes, as Linux reports it; None where it cannot be read."""
    try:
        for index in sorted(os.listdir(base)):
            folder = os.path.join(base, index)
            with open(os.path.join(folder, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(folder, "size")) as f:
                size = f.read().strip()  # "512K", "1024K", "2M"
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
            return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return None


# `split_rows`'s `block_elements` for a Function of many passes over its input (GELU; module 07): blocks
# of 2^17 floats paid where a core's level-2 cache is small (GELU 1.2x faster on AMD Zen 1, 512 KiB), and
# lost where it is not (Zen 4, 1 MiB: the course GPT's step 1.05x PyTorch's whole, 1.07x in blocks)
CACHE_BLOCK_ELEMENTS = 1 << 17 if (_level2_cache_bytes() or 0) in range(1, 1 << 20) else None


def get_num_threads():
    """How many threads TinyTorch's elementwise work (and numpy's BLAS, if set here) may use."""
    return _state["threads"]


def set_num_threads(n):
    """Use `n` threads: numpy's BLAS (matrix products) and the pool of `map_chunks` (like torch)."""
    if isinstance(n, bool) or not isinstance(n, int):  # PyTorch's errors
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer (got {n})")
    from threadpoolctl import ThreadpoolController
    with _lock:
        if n != _state["threads"] or (n > 1) != (_state["pool"] is not None):
            if _state["pool"] is not None:
                _state["pool"].shutdown(wait=True)
            _state["pool"] = ThreadPoolExecutor(n - 1, thread_name_prefix="tinytorch") if n > 1 else None
            _state["threads"] = n
        _state["blas"] = ThreadpoolController().select(user_api="blas").lib_controllers
        _set_blas_threads(n)  # applies now, for the process


def _set_blas_threads(n):
    for library in _state["blas"] or ():
        library.set_num_threads(n)


def chunk_bounds(n, parts):
    """`parts` contiguous (start, stop) ranges covering range(n), sizes differing by at most 1."""
    parts = max(1, min(parts, n))
    edges = [n * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _split_now(rows, elements, min_elements=MIN_ELEMENTS):
    """Whether work on `rows` rows (`elements` elements in all) is worth cutting into chunks here."""
    return (_state["pool"] is not None and rows >= 2 and elements >= min_elements
            and not getattr(_chunk, "running", False))


def _as_chunk(call):
    _chunk.running = True
    try:
        return call()
    finally:
        _chunk.running = False


def _run_chunks(calls):
    """Run the argument-less `calls`, the first on this thread and the others on the pool; wait for
    all of them and return their results in order (a worker's exception is re-raised here). A single
    call just runs here, as unchunked work does."""
    if len(calls) == 1:
        return [calls[0]()]
    _set_blas_threads(1)
    try:
        futures = [_state["pool"].submit(_as_chunk, call) for call in calls[1:]]
        try:
            first = _as_chunk(calls[0])
        finally:
            rest = [f.result() for f in futures]
    finally:
        _set_blas_threads(_state["threads"])
    return [first, *rest]


def _each_block(parts, call):
    """`call(start, stop, context)` for every block of `parts` (one list of blocks per thread), each
    thread's blocks one after the other on its thread; returns the results of all blocks, in order."""
    def run(blocks):
        return [call(*block) for block in blocks]
    return sum(_run_chunks([partial(run, blocks) for blocks in parts]), [])


class _RowsOut:
    """A (rows, ...) array that blocks of rows are copied into, each by the thread that made it, right
    after making it: the copy reads the block while it is still in that core's cache, the threads copy
    at once, and each block's own array is freed at once. Made by the first block to arrive."""

    def __init__(self, rows):
        self.rows, self.array, self._lock = rows, None, threading.Lock()

    def put(self, start, stop, block):
        if self.array is None:
            with self._lock:
                if self.array is None:
                    self.array = np.empty((self.rows,) + block.shape[1:], block.dtype)
        self.array[start:stop] = block


def map_chunks(work, n, min_elements=MIN_ELEMENTS, per_item=1):
    """Run `work(start, stop)` over range(n) split across the threads; `per_item` elements per index
    (e.g. a row's length) count toward `min_elements`. `work` must write only its own chunk."""
    if not _split_now(n, n * per_item, min_elements):
        work(0, n)
        return
    _run_chunks([partial(work, start, stop) for start, stop in chunk_bounds(n, _state["threads"])])


def split_rows(function, split=(0,), can_split=None, min_elements=MIN_ELEMENTS, block_elements=None):
    """`function` (an autograd Function) with its forward and backward run on chunks of rows, one
    chunk per thread.

    The arguments at positions `split` (Tensors or numpy arrays of the same length; None is left as
    it is) are cut along dim 0, the others go whole to every chunk. Each chunk runs
    `function.forward` on a context of its own, and the results are joined along dim 0 (each thread
    copies its own, see `_RowsOut`); backward runs each chunk's `function.backward` on its rows of
    the gradient, joins the gradients of the cut inputs the same way and adds up those of the others
    (a LayerNorm's weight). That is only right when rows do not interact, which `can_split(*args)`
    checks for each call (softmax along dim 0 is not). With one thread, inputs of fewer than
    `min_elements` elements or `can_split` false, `function` runs as it is, on the call's context.
    Raise `min_elements` for a Function of a few light passes over memory that a second thread does
    not speed up in the models that use it (pooling): two cores share one memory bus and cache.

    `block_elements`, where given, also cuts each thread's rows (one thread's too) into blocks of about
    that many elements, run one after the other, each on a context of its own: a Function of many
    numpy passes over its whole input (GELU) then reads and writes a block that stays in the core's
    level-2 cache, instead of memory, in every pass.
    """
    from .autograd import Function, Context, Tensor, fit_gradient  # module 03: not at import, so that
    # tt.set_num_threads works in a learner's package before notebook 03 is exported

    def forward(ctx, *args):
        ctx.parts = None
        if _state["pool"] is None and block_elements is None:  # one thread, no blocks: nothing to decide
            return function.forward(ctx, *args)
        cut = [args[i] for i in split if args[i] is not None]
        rows = cut[0].shape[0] if cut[0].shape else 0
        if rows < 2 or any(a.shape[0] != rows for a in cut) or (can_split is not None and not can_split(*args)):
            return function.forward(ctx, *args)
        elements = math.prod(cut[0].shape)
        threads = _state["threads"] if _split_now(rows, elements, min_elements) else 1
        block = max(1, block_elements * rows // elements) if block_elements else rows  # rows per block
        if threads == 1 and block >= rows:
            return function.forward(ctx, *args)
        ctx.parts = [[(b, min(b + block, stop), Context(function)) for b in range(start, stop, block)]
                     for start, stop in chunk_bounds(rows, threads)]

        out = _RowsOut(rows)

        def block_forward(start, stop, part):
            chunk = [a[start:stop] if i in split and a is not None else a for i, a in enumerate(args)]
            out.put(start, stop, function.forward(part, *chunk)._numpy())
        _each_block(ctx.parts, block_forward)
        return Tensor._from_array(out.array)

    def backward(ctx, grad):
        if ctx.parts is None:
            return function.backward(ctx, grad)

        outs = {i: _RowsOut(grad.shape[0]) for i in split}

        def block_backward(start, stop, part):
            """The block's gradients of the cut inputs go into `outs`; those of the others are returned."""
            part.needs_input_grad = ctx.needs_input_grad
            grads = function.backward(part, grad[start:stop])
            grads = grads if isinstance(grads, tuple) else (grads,)
            for i in split:
                if grads[i] is not None:
                    outs[i].put(start, stop, np.asarray(grads[i]))
            return tuple(None if i in split else g for i, g in enumerate(grads))
        blocks = _each_block(ctx.parts, block_backward)
        joined = []
        for i, t in enumerate(ctx.inputs):
            if i in split:
                joined.append(outs[i].array)
            else:
                grads = [block[i] for block in blocks]
                joined.append(None if grads[0] is None else sum(fit_gradient(g, t) for g in grads))
        return tuple(joined)

    return type(function.__name__, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward),
                                                 "__doc__": function.__doc__, "__module__": function.__module__})
