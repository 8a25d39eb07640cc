"""Threads for numpy's elementwise work: `set_num_threads` (like `torch.set_num_threads`) and `map_chunks`.

Written by hand (given code, explained in module 07's "Two cores" section); learners never write it.

numpy runs each ufunc call (`a * b`, `np.exp(a)`) on one core. It does release Python's GIL while it
loops over the elements, so two Python threads, each running the same ufuncs on its own half of the
rows, really run on two cores at once. `map_chunks(work, n)` splits `range(n)` into one contiguous
chunk per thread, runs `work(start, stop)` for each on a small pool (the calling thread takes the
first chunk) and waits for all of them. Below `MIN_ELEMENTS` it calls `work(0, n)` directly: handing
a chunk to a thread costs tens of microseconds, more than a small array saves.

One knob, `set_num_threads(n)`, sets both this pool and the BLAS threads of numpy's matrix products
(through threadpoolctl), so they cannot oversubscribe the cores: the pool only runs elementwise
work, BLAS only runs inside a matmul, and the caller waits for each, so the two never overlap.
The default is 1 thread for the pool (nothing changes until you ask for more).
"""
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["set_num_threads", "get_num_threads", "map_chunks", "MIN_ELEMENTS"]

MIN_ELEMENTS = 1 << 16
_state = {"threads": 1, "pool": None, "blas": None}
_lock = threading.Lock()


def get_num_threads():
    """How many threads TinyTorch's elementwise work (and numpy's BLAS, if set here) may use."""
    return _state["threads"]


def set_num_threads(n):
    """Use `n` threads: numpy's BLAS (matrix products) and the pool of `map_chunks` (like torch)."""
    if isinstance(n, bool) or not isinstance(n, int):  # PyTorch's errors
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer (got {n})")
    from threadpoolctl import threadpool_limits
    with _lock:
        if n != _state["threads"] or (n > 1) != (_state["pool"] is not None):
            if _state["pool"] is not None:
                _state["pool"].shutdown(wait=True)
            _state["pool"] = ThreadPoolExecutor(n - 1, thread_name_prefix="tinytorch") if n > 1 else None
            _state["threads"] = n
        _state["blas"] = threadpool_limits(limits=n, user_api="blas")  # applies now, for the process


def chunk_bounds(n, parts):
    """`parts` contiguous (start, stop) ranges covering range(n), sizes differing by at most 1."""
    parts = max(1, min(parts, n))
    edges = [n * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def map_chunks(work, n, min_elements=MIN_ELEMENTS, per_item=1):
    """Run `work(start, stop)` over range(n) split across the threads; `per_item` elements per index
    (e.g. a row's length) count toward `min_elements`. `work` must write only its own chunk."""
    threads, pool = _state["threads"], _state["pool"]
    if threads == 1 or pool is None or n * per_item < min_elements or n < 2:
        work(0, n)
        return
    bounds = chunk_bounds(n, threads)
    futures = [pool.submit(work, start, stop) for start, stop in bounds[1:]]
    try:
        work(*bounds[0])
    finally:
        for f in futures:
            f.result()  # re-raises a worker's exception here
