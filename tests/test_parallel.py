"""tinytorch.parallel: one knob for numpy's BLAS threads and the elementwise pool; chunked work is
exact (the same numbers as one thread), covers every index once, and re-raises a worker's error."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from threadpoolctl import threadpool_info

import tinytorch as tt
from tinytorch import parallel
from tinytorch.nn import _erf


@pytest.fixture
def two_threads():
    before = tt.get_num_threads()
    tt.set_num_threads(2)
    yield
    tt.set_num_threads(before)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 1000), parts=st.integers(1, 8))
def test_chunk_bounds_cover_the_range_once(n, parts):
    bounds = parallel.chunk_bounds(n, parts)
    covered = [i for start, stop in bounds for i in range(start, stop)]
    assert covered == list(range(n))
    sizes = [stop - start for start, stop in bounds]
    assert len(bounds) == max(1, min(parts, n)) and max(sizes) - min(sizes) <= 1


def test_set_num_threads_sets_blas_and_the_pool(two_threads):
    assert tt.get_num_threads() == 2
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 2 for p in blas)
    seen = set()
    parallel.map_chunks(lambda start, stop: seen.add((threading.get_ident(), start, stop)), 1 << 17)
    assert len({ident for ident, _, _ in seen}) == 2 and sorted((a, b) for _, a, b in seen) == [(0, 1 << 16), (1 << 16, 1 << 17)]
    small = set()
    parallel.map_chunks(lambda start, stop: small.add((threading.get_ident(), start, stop)), 100)
    assert small == {(threading.get_ident(), 0, 100)}  # below MIN_ELEMENTS: the caller alone
    tt.set_num_threads(1)
    assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")


@pytest.mark.parametrize("bad, message", [(0, "positive integer"), (-2, "positive integer"), (1.5, "an int"),
                                          (True, "an int")])
def test_set_num_threads_rejects_what_pytorch_rejects(bad, message):
    with pytest.raises(RuntimeError, match=message):
        tt.set_num_threads(bad)


def test_a_worker_error_reaches_the_caller(two_threads):
    def work(start, stop):
        if start > 0:
            raise ValueError(f"chunk {start}")
    with pytest.raises(ValueError, match="chunk"):
        parallel.map_chunks(work, 1 << 17)


def test_threaded_erf_and_gelu_equal_one_thread(two_threads):
    a = np.random.default_rng(0).standard_normal((3, 70_001)).astype(np.float32) * 3
    got = _erf(a)
    tt.set_num_threads(1)
    assert np.array_equal(got, _erf(a))
    x = tt.tensor(a, requires_grad=True)
    tt.nn.functional.gelu(x).sum().backward()
    want = (tt.nn.functional.gelu(tt.tensor(a)).numpy(), x.grad.numpy())
    tt.set_num_threads(2)
    x = tt.tensor(a, requires_grad=True)
    y = tt.nn.functional.gelu(x)
    y.sum().backward()
    assert np.array_equal(y.detach().numpy(), want[0]) and np.array_equal(x.grad.numpy(), want[1])


def test_the_knob_is_at_the_top_level_like_torch():
    assert tt.set_num_threads is parallel.set_num_threads and tt.get_num_threads is parallel.get_num_threads
    assert {"set_num_threads", "get_num_threads"} <= set(dir(tt))
