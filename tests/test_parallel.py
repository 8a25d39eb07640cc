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


# ------------------------------------------------- split_rows: Functions run on chunks of rows (issue 19)

def _ops():
    """name -> (make the inputs from a numpy Generator, run the op on them): each op whose rows go to the threads."""
    import tinytorch.nn.functional as F
    from tinytorch.attention import scaled_dot_product_attention
    from tinytorch.conv import avg_pool2d, conv2d, max_pool2d

    def normal(*shape):
        return lambda rng: rng.standard_normal(shape).astype(np.float32)
    layer_norm = tt.nn.LayerNorm(256)
    return {
        "linear": ([normal(64, 2, 512), normal(48, 512), normal(48)], lambda x, w, b: F.linear(x, w, b)),
        "gelu": ([normal(96, 1024)], F.gelu),
        "softmax": ([normal(8, 64, 256)], lambda x: F.softmax(x, dim=1)),
        "log_softmax": ([normal(8, 64, 256)], lambda x: F.log_softmax(x, dim=-1)),
        "layer_norm": ([normal(16, 256, 256)], lambda x: layer_norm(x)),
        "attention": ([normal(16, 2, 64, 32)] * 3, lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True)),
        "attention_dropout": ([normal(16, 2, 64, 32)] * 3, lambda q, k, v: scaled_dot_product_attention(
            q, k, v, dropout_p=0.5, generator=tt.Generator().manual_seed(1))),
        "conv2d": ([normal(16, 4, 32, 32), normal(6, 4, 3, 3), normal(6)], lambda x, w, b: conv2d(x, w, b, padding=1)),
        "max_pool2d": ([normal(64, 16, 32, 32)], lambda x: max_pool2d(x, 2)),  # light too
        "avg_pool2d": ([normal(64, 16, 32, 32)], lambda x: avg_pool2d(x, 3, stride=2)),
    }, layer_norm


def _forward_backward(op, arrays, params=()):
    """The op's output and the gradients of its inputs (and of `params`) for a fixed upstream gradient."""
    inputs = [tt.tensor(a, requires_grad=True) for a in arrays]
    for p in params:
        p.grad = None
    out = op(*inputs)
    upstream = np.random.default_rng(7).standard_normal(out.shape).astype(np.float32)
    out.backward(tt.tensor(upstream))
    return out, [out.detach().numpy()] + [t.grad.numpy() for t in inputs] + [p.grad.numpy() for p in params]


@pytest.mark.parametrize("name", list(_ops()[0]))
def test_an_op_split_over_two_threads_gives_one_threads_values_and_gradients(name, two_threads):
    ops, layer_norm = _ops()
    makers, op = ops[name]
    arrays = [make(np.random.default_rng(i)) for i, make in enumerate(makers)]
    params = list(layer_norm.parameters()) if name == "layer_norm" else []
    out, split = _forward_backward(op, arrays, params)
    assert out.grad_fn.parts is not None and len(out.grad_fn.parts) == 2, f"{name}: not split over the two threads"
    node_name = out.grad_fn.name()
    tt.set_num_threads(1)
    out, whole = _forward_backward(op, arrays, params)
    assert out.grad_fn.parts is None and out.grad_fn.name() == node_name, "the node keeps its Function's name"
    for what, got, want in zip(["output"] + [f"grad {i}" for i in range(len(whole) - 1)], split, whole):
        assert got.shape == want.shape, f"{name} {what}: shape {got.shape} split, {want.shape} whole"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"{name} {what}: two threads differ from one")


@pytest.mark.parametrize("case", ["softmax over dim 0", "1-d linear", "small", "attention bias with a batch dim",
                                  "attention broadcast key", "light and below a million elements"])
def test_calls_whose_rows_interact_or_are_small_run_whole(case, two_threads):
    import tinytorch.nn.functional as F
    from tinytorch.attention import scaled_dot_product_attention
    rng = np.random.default_rng(0)
    big = tt.tensor(rng.standard_normal((256, 512)).astype(np.float32), requires_grad=True)
    q = tt.tensor(rng.standard_normal((16, 2, 64, 32)).astype(np.float32), requires_grad=True)
    out = {
        "softmax over dim 0": lambda: F.softmax(big, dim=0),
        "1-d linear": lambda: F.linear(big.reshape(-1), big.reshape(1, -1)),
        "small": lambda: F.gelu(big[:4]),
        "attention bias with a batch dim": lambda: scaled_dot_product_attention(
            q, q, q, attn_mask=tt.tensor(rng.standard_normal((16, 2, 64, 64)).astype(np.float32))),
        "attention broadcast key": lambda: scaled_dot_product_attention(q, q[:1], q[:1]),
        "light and below a million elements": lambda: F.max_pool2d(big.reshape(8, 16, 32, 32), 2),
    }[case]()
    assert out.grad_fn.parts is None, f"{case}: split although its rows are not independent (or it is small)"


@pytest.mark.parametrize("threads", [1, 2])
def test_blocks_give_the_whole_functions_values_and_gradients(threads):
    """`block_elements`: each thread's rows in blocks, each on a context of its own. Values and the cut
    input's gradient equal the whole Function's; a shared input's gradient (a weight) adds up the blocks'."""
    from tinytorch.nn import GELUFunction, LinearFunction
    before = tt.get_num_threads()
    tt.set_num_threads(threads)
    try:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((300, 64)).astype(np.float32)  # 19,200 elements: blocks of 15 rows
        w = rng.standard_normal((8, 64)).astype(np.float32)
        for function, extra in ((GELUFunction, ["tanh"]), (GELUFunction, ["none"]), (LinearFunction, [w, None])):
            blocked = parallel.split_rows(function, min_elements=1, block_elements=1000)
            runs = []
            for fn in (function, blocked):
                inputs = [tt.tensor(x, requires_grad=True)] + [
                    tt.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in extra]
                out = fn.apply(*inputs)
                out.backward(tt.tensor(np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)))
                runs.append((out, [out.detach().numpy()] + [t.grad.numpy() for t in inputs if isinstance(t, tt.Tensor)]))
            (_, want), (out, got) = runs
            name = f"{function.__name__}{extra[:1] if isinstance(extra[0], str) else ''}"
            assert [len(p) for p in out.grad_fn.parts] == [20 // threads] * threads, f"{name}: not 20 blocks"
            for what, g, v in zip(["output", "grad x", "grad weight"], got, want):
                np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(v).max())),
                                           err_msg=f"{name} {what}: blocks differ from the whole Function")
    finally:
        tt.set_num_threads(before)


def test_inside_chunks_blas_runs_one_thread_and_nested_work_stays_on_its_thread(two_threads):
    seen = []

    def probe(start, stop):
        blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
        nested = set()
        parallel.map_chunks(lambda a, b: nested.add(threading.get_ident()), 1 << 17)
        seen.append((threading.get_ident(), blas, nested))
    parallel.map_chunks(probe, 1 << 17)
    assert len({ident for ident, _, _ in seen}) == 2, "the two chunks did not run on two threads"
    assert all(blas == {1} for _, blas, _ in seen), f"BLAS threads inside chunks: {[b for _, b, _ in seen]}"
    assert all(nested == {ident} for ident, _, nested in seen), "nested work left its chunk's thread"
    assert all(p["num_threads"] == 2 for p in threadpool_info() if p["user_api"] == "blas"), "BLAS not restored"


def test_a_split_op_reports_errors_and_in_place_changes_as_the_whole_op(two_threads):
    import tinytorch.nn.functional as F
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((64, 2048)).astype(np.float32), requires_grad=True)
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.softmax(x.reshape(64, 2, 1024), dim=5)
    h = x * 1
    y = F.linear(h, tt.tensor(rng.standard_normal((16, 2048)).astype(np.float32)))
    assert y.grad_fn.parts is not None
    with tt.no_grad():
        h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y = F.gelu(x)
    y.sum().backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6, err_msg="retain_graph: second backward")
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()


@pytest.mark.parametrize("size, expected", [("512K", 512 << 10), ("1024K", 1 << 20), ("2M", 2 << 20), ("junk", None)])
def test_the_level2_cache_is_read_from_linux_and_sets_gelus_blocks(tmp_path, size, expected):
    """Blocks for GELU (CACHE_BLOCK_ELEMENTS) only where a core's level-2 cache is under 1 MiB."""
    for index, (level, text) in enumerate([("1", "32K"), ("1", "32K"), ("2", size), ("3", "32768K")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "level").write_text(level + "\n")
        (tmp_path / f"index{index}" / "size").write_text(text + "\n")
    assert parallel._level2_cache_bytes(str(tmp_path)) == expected
    assert parallel._level2_cache_bytes(str(tmp_path / "missing")) is None
    here = parallel._level2_cache_bytes()
    assert parallel.CACHE_BLOCK_ELEMENTS == (1 << 17 if here and here < 1 << 20 else None)
