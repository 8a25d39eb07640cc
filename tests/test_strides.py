"""Module 02's package (tinytorch.strides) against numpy on hypothesis-generated non-contiguous layouts."""
import contextlib
import math
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from tinytorch import strides as ts
from tinytorch.testing import assert_raises

settings.register_profile("tinytorch", max_examples=60, deadline=None)
settings.load_profile("tinytorch")


@st.composite
def strided(draw, min_dims=0, max_dims=4, max_size=4, dtype=np.float64):
    """`(tensor, numpy twin)`: a tensor with a non-trivial layout and the same array made by numpy.

    Starts from a contiguous base (sizes may be 0 or 1), then applies any of: a slice with a step
    and a start (non-zero offset), a permutation, an expand of the size-1 dimensions (stride 0).
    """
    shape = tuple(draw(st.lists(st.integers(0, max_size), min_size=min_dims, max_size=max_dims)))
    base = np.arange(math.prod(shape) + 3, dtype=dtype)[3:].reshape(shape) - 5
    t, a = ts.tensor(base), base
    if draw(st.booleans()) and shape:  # a stepped slice with an offset
        index = tuple(slice(draw(st.integers(0, 2)), None, draw(st.integers(1, 3))) for _ in shape)
        t, a = t[index], a[index]
    if draw(st.booleans()) and t.ndim:
        dims = tuple(draw(st.permutations(range(t.ndim))))
        t, a = t.permute(*dims), a.transpose(dims)
    if draw(st.booleans()):  # stretch size-1 dimensions (stride 0) and add a leading one
        target = (draw(st.integers(1, 3)),) + tuple(draw(st.integers(0, 3)) if n == 1 else n for n in t.shape)
        t, a = t.expand(*target), np.broadcast_to(a, target)
    assert t.shape == a.shape
    return t, a


def same(t, a):
    assert t.shape == a.shape, (t.shape, a.shape)
    np.testing.assert_allclose(t.numpy(), a, rtol=1e-6, atol=1e-9)
    return True


@given(strided())
def test_contiguous_agrees_with_the_reference_copy(pair):
    t, a = pair
    c = t.contiguous()
    assert c.is_contiguous() and same(c, a)
    assert np.array_equal(c.numpy().reshape(-1), ts.reference_copy(t.storage, t.shape, t.strides, t.offset))
    assert (c is t) == ts.is_contiguous_layout(t.shape, t.strides)
    assert ts.is_contiguous_layout(t.shape, t.strides) == a.flags.c_contiguous or 0 in a.shape


@given(strided(min_dims=1), st.data())
def test_view_ops_match_numpy_and_share_storage(pair, data):
    t, a = pair
    n = t.ndim
    d0, d1 = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-n, n - 1))
    u = data.draw(st.integers(-n - 1, n))
    views = [(t.transpose(d0, d1), np.swapaxes(a, d0, d1)), (t.T, a.T), (t.unsqueeze(u), np.expand_dims(a, u)),
             (t.squeeze(), np.squeeze(a)), (t[..., None], a[..., None]), (t[-1:], a[-1:]), (t[:, None] if n > 1 else t, a[:, None] if n > 1 else a)]
    if n >= 2:
        views.append((t.mT, np.swapaxes(a, -1, -2)))
    if a.shape[0]:
        views += [(t[0], a[0]), (t[-1, ...], a[-1, ...]), (t[::2], a[::2])]
    for got, want in views:
        assert got.storage is t.storage and same(got, want)
    assert same(t.flatten(), a.reshape(-1)) and same(t.reshape(-1), a.reshape(-1))
    if n >= 2:
        assert same(t.flatten(1), a.reshape(a.shape[0], math.prod(a.shape[1:])))


@given(strided(), st.data())
def test_view_succeeds_exactly_when_numpy_can_reshape_without_copy(pair, data):
    t, a = pair
    numel = a.size
    assume(numel > 0)
    first = data.draw(st.sampled_from([k for k in range(1, numel + 1) if numel % k == 0]))
    new_shape = data.draw(st.permutations([first, numel // first, 1]))
    try:
        want = np.reshape(a, new_shape, copy=False)
    except ValueError:
        assert_raises(RuntimeError, t.view, *new_shape)
        r = t.reshape(*new_shape)
        assert r.storage is not t.storage and same(r, a.reshape(new_shape))
        return
    v = t.view(*new_shape)
    assert v.storage is t.storage and same(v, want)
    assert [s for n, s in zip(v.shape, v.strides) if n > 1] == \
        [s // a.itemsize for n, s in zip(want.shape, want.strides) if n > 1]


@given(strided(), st.data())
def test_basic_indexing_layout_matches_numpy(pair, data):
    t, a = pair
    entries = st.one_of(st.integers(-4, 3), st.none(), st.just(Ellipsis),
                        st.builds(slice, st.one_of(st.none(), st.integers(-5, 5)), st.one_of(st.none(), st.integers(-5, 5)),
                                  st.one_of(st.none(), st.integers(1, 3))))
    index = tuple(data.draw(st.lists(entries, max_size=4)))
    np_index = index if any(i is Ellipsis for i in index) else index + (Ellipsis,)
    try:
        want = a[np_index]
    except IndexError:
        with pytest.raises(IndexError):
            t[index]
        return
    got = t[index]
    assert got.storage is t.storage and same(got, want)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "greater", "equal", "maximum"])
@given(strided(max_dims=3), strided(max_dims=3))
def test_binary_ops_broadcast_like_numpy(op, left, right):
    (t, a), (u, b) = left, right
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        assert_raises(RuntimeError, lambda: t + u)
        return
    fn = getattr(np, op)
    method = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "divide": "__truediv__",
              "greater": "__gt__", "equal": "__eq__", "maximum": "maximum"}[op]
    with np.errstate(divide="ignore", invalid="ignore"):
        want = fn(a, b)
    got = getattr(t, method)(u)
    assert got.shape == shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, equal_nan=True)


@given(strided(max_dims=3), st.data())
def test_reductions_match_numpy(pair, data):
    t, a = pair
    n = t.ndim
    dims = data.draw(st.one_of(st.none(), st.integers(-max(n, 1), max(n, 1) - 1),
                               st.lists(st.integers(0, max(n - 1, 0)), unique=True, max_size=n).map(tuple)))
    keep = data.draw(st.booleans())
    if n == 0:
        axis = None
    else:
        axis = None if dims is None or dims == () else dims
    got_shape = np.sum(a, axis=axis, keepdims=keep).shape if n else ()
    assert same(t.sum(dims, keepdim=keep), np.sum(a, axis=axis, keepdims=keep).reshape(got_shape))
    with np.errstate(all="ignore"), _quiet():
        mean = np.mean(a, axis=axis, keepdims=keep).reshape(got_shape)
        var = np.var(a, axis=axis, ddof=1, keepdims=keep).reshape(got_shape)
    np.testing.assert_allclose(t.mean(dims, keepdim=keep).numpy(), mean, equal_nan=True)
    np.testing.assert_allclose(t.var(dims, keepdim=keep).numpy(), var, equal_nan=True)
    np.testing.assert_allclose(t.std(dims, keepdim=keep).numpy(), np.sqrt(var), equal_nan=True)
    if isinstance(dims, int) and n and a.shape[dims] > 0:
        result = t.max(dims, keepdim=keep)
        assert same(result.values, np.max(a, axis=dims, keepdims=keep))
        assert np.array_equal(result.indices.numpy(), np.argmax(a, axis=dims, keepdims=keep))
        assert np.array_equal(t.argmin(dims, keepdim=keep).numpy(), np.argmin(a, axis=dims, keepdims=keep))
    if a.size:
        assert t.max().item() == a.max() and t.argmax().item() == np.argmax(a)


@contextlib.contextmanager
def _quiet():
    """numpy warns about means of nothing; PyTorch (and TinyTorch) quietly give nan."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


batch_shapes = st.lists(st.sampled_from([1, 2, 3]), max_size=2).map(tuple)


@given(batch_shapes, batch_shapes, st.integers(0, 3), st.integers(1, 3), st.integers(0, 3),
       st.sampled_from(["1d-a", "1d-b", "both", "none"]), st.booleans())
def test_matmul_matches_numpy(batch_a, batch_b, n, k, m, vectors, transposed):
    rng = np.random.default_rng(0)
    a_shape = (k,) if vectors in ("1d-a", "both") else batch_a + (n, k)
    b_shape = (k,) if vectors in ("1d-b", "both") else batch_b + (k, m)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    ta, tb = ts.tensor(a), ts.tensor(b)
    if transposed and tb.ndim >= 2:  # a non-contiguous right operand with the same values
        tb = ts.tensor(np.ascontiguousarray(np.swapaxes(b, -1, -2))).mT
        assert not tb.is_contiguous() or min(tb.shape[-2:]) <= 1
    try:
        want = np.matmul(a, b)
    except ValueError:
        assert_raises(RuntimeError, lambda: ta @ tb)
        return
    got = ta @ tb
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_matmul_errors_agree_with_torch():
    torch = pytest.importorskip("torch")
    for sa, sb in [((3,), (4,)), ((2, 3), (4, 5)), ((2, 3), (4,)), ((3,), (4, 5)), ((6, 2, 3), (6, 4, 5)),
                   ((6, 2, 3), (4, 5)), ((), (3,))]:
        with pytest.raises(RuntimeError) as theirs:
            torch.zeros(sa) @ torch.zeros(sb)
        error = assert_raises(RuntimeError, lambda: ts.zeros(*sa) @ ts.zeros(*sb))
        assert str(error) == str(theirs.value), (sa, sb)


def test_view_layouts_agree_with_torch():
    torch = pytest.importorskip("torch")
    x, y = ts.arange(120).view(2, 3, 4, 5), torch.arange(120).view(2, 3, 4, 5)
    cases = [lambda v: v.permute(3, 1, 0, 2), lambda v: v.transpose(1, -1), lambda v: v[1, ::2, 1:],
             lambda v: v[:, None, 2], lambda v: v[..., None], lambda v: v.unsqueeze(2), lambda v: v[:, :1].squeeze(1),
             lambda v: v[:, 1].expand(3, 2, 4, 5), lambda v: v.transpose(0, 1).reshape(3, 2, 20),
             lambda v: v[:, 1:].view(2, 40), lambda v: v.mT.flatten(0, 1), lambda v: v[:1].expand(4, 3, 4, 5)]
    for case in cases:
        mine, theirs = case(x), case(y)
        assert mine.shape == tuple(theirs.shape)
        assert mine.strides == theirs.stride() and mine.offset == theirs.storage_offset()
        assert mine.tolist() == theirs.tolist()
    for op in [lambda v: v.transpose(1, 2).view(2, 12, 5), lambda v: v.view(7, -1)]:
        with pytest.raises(RuntimeError) as theirs:
            op(y)
        assert str(assert_raises(RuntimeError, op, x)) == str(theirs.value)
    with pytest.raises(RuntimeError) as theirs:
        torch.zeros(3).expand(2, 4)
    assert str(assert_raises(RuntimeError, ts.zeros(3).expand, 2, 4)) == str(theirs.value)


def test_views_are_zero_copy_and_write_through():
    t = ts.zeros(1000, 1000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        views = [t.T, t[::2, 1:], t.view(-1), t.unsqueeze(0).expand(3, 1000, 1000), t[5], t.permute(1, 0)[None]]
        allocated = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert allocated < 20_000, f"views allocated {allocated} bytes"
    assert all(v.storage is t.storage for v in views)
    views[1][0, 0] = 7.0
    assert t[0, 1].item() == 7.0
    views[0][3, 2] = 5.0
    assert t[2, 3].item() == 5.0
    for piece in t.chunk(4):
        assert piece.storage is t.storage


@given(strided(min_dims=1, max_dims=3), st.data())
def test_setitem_writes_through_views_like_numpy(pair, data):
    t, a = pair
    assume(0 not in t.strides or t.numel() == 0)  # writing into broadcast memory is undefined
    t, a = t.clone(), np.array(a)
    view, twin = t.T, a.T
    index = (slice(data.draw(st.integers(0, 2)), None, data.draw(st.integers(1, 2))),)
    view[index] = -1.0
    twin[index] = -1.0
    assert same(t, a)
    mask = t > 0
    t[mask] = 9.0
    a[a > 0] = 9.0
    assert same(t, a)


@given(strided(min_dims=1, max_dims=3), st.data())
def test_joining_and_splitting_match_numpy(pair, data):
    t, a = pair
    d = data.draw(st.integers(-t.ndim, t.ndim - 1))
    assert same(ts.cat([t, t], dim=d), np.concatenate([a, a], axis=d))
    s = data.draw(st.integers(-t.ndim - 1, t.ndim))
    assert same(ts.stack([t, t, t], dim=s), np.stack([a, a, a], axis=s))
    size = a.shape[d]
    step = data.draw(st.integers(1, 3))
    pieces = t.split(step, dim=d)
    assert all(p.storage is t.storage for p in pieces)
    if size:
        want = np.split(a, list(range(step, size, step)), axis=d)
        assert len(pieces) == len(want) and all(same(p, w) for p, w in zip(pieces, want))
        chunks = data.draw(st.integers(1, 4))
        got = t.chunk(chunks, dim=d)
        assert sum(c.shape[d] for c in got) == size and len(got) <= chunks
    mask = t > 0
    assert same(t.masked_fill(mask, 0.5), np.where(a > 0, 0.5, a))
    assert same(ts.where(mask, t, -t), np.where(a > 0, a, -a))
    if t.ndim >= 2:
        k = data.draw(st.integers(-2, 2))
        assert same(t.tril(k), np.tril(a, k)) and same(t.triu(k), np.triu(a, k))


def test_broadcast_error_names_both_shapes_and_the_dimension():
    error = assert_raises(RuntimeError, lambda: ts.zeros(5, 3, 2) * ts.zeros(4, 1))
    assert "(5, 3, 2)" in str(error) and "(4, 1)" in str(error) and "dimension 1" in str(error)


def test_zero_dim_and_empty_tensors():
    s = ts.tensor(2.5)
    assert s.sum().item() == 2.5 and s.sum(0).item() == 2.5 and s.max(dim=-1).indices.item() == 0
    assert s.T.shape == () and s[None].shape == (1,) and s[...].shape == () and s.reshape(1, 1).shape == (1, 1)
    assert s.unsqueeze(0).shape == (1,) and s.flatten().shape == (1,)
    e = ts.zeros(2, 0, 3)
    assert e.sum(1).shape == (2, 3) and e.T.shape == (3, 0, 2) and e.view(0, 6).shape == (0, 6)
    assert e.is_contiguous() and e.transpose(0, 2).is_contiguous()
    assert (e + ts.ones(3)).shape == (2, 0, 3) and (ts.zeros(2, 0) @ ts.zeros(0, 3)).tolist() == [[0.0] * 3] * 2
    assert_raises(IndexError, lambda: e.max(1))
    assert_raises(TypeError, lambda: iter(s))


# ----- indexing as PyTorch (issue 16) -------------------------------------------------------------
def test_an_int_and_an_index_tensor_keep_pytorchs_dimension_order():
    """PyTorch applies ints first: x[1, :, idx] is x[1][:, idx], (5, 3); numpy's x[1, :, idx] is (3, 5)."""
    x = np.arange(60.0).reshape(2, 5, 6)
    t, idx = ts.tensor(x), ts.tensor([0, 2, 5])
    got = t[1, :, idx]
    assert got.shape == (5, 3)
    np.testing.assert_array_equal(got.numpy(), x[1][:, [0, 2, 5]])
    np.testing.assert_array_equal(t[:, 2, [1, 1]].numpy(), x[:, 2][:, [1, 1]])
    np.testing.assert_array_equal(t[ts.tensor([1, 0]), :, -1].numpy(), x[[1, 0], :, -1])  # numpy agrees here
    error = assert_raises(IndexError, lambda: t[ts.tensor([0, 2]), 1])
    assert "out of bounds for dimension 0 with size 2" in str(error)  # PyTorch's words, not numpy's
    mask = x[0] > 10
    np.testing.assert_array_equal(t[1, ts.tensor(mask)].numpy(), x[1][mask])
    y = ts.zeros(2, 5, 6)
    y[1, :, idx] = ts.arange(15.0).view(5, 3)  # the value is in PyTorch's order too
    np.testing.assert_array_equal(y.numpy()[1][:, [0, 2, 5]], np.arange(15.0).reshape(5, 3))
    assert y.numpy()[0].sum() == 0


def test_a_tuple_inside_an_index_is_an_index_list():
    x = np.arange(24).reshape(2, 3, 4)
    t = ts.tensor(x)
    np.testing.assert_array_equal(t[(0, 1), :].numpy(), x[[0, 1], :])
    np.testing.assert_array_equal(t[:, (2, 0, 2)].numpy(), x[:, [2, 0, 2]])
    assert t[(1, 2)].shape == (4,)  # the whole index as a tuple is still two ints


@st.composite
def mixed_index(draw):
    """An index of (2, 3, 4) mixing ints, slices, None and index lists (of one length: they broadcast)."""
    entries, length = [], draw(st.integers(1, 3))
    for size in (2, 3, 4):
        kind = draw(st.sampled_from(["int", "slice", "list", "none"]))
        if kind == "none":
            entries.append(None)
            kind = "slice"
        if kind == "int":
            entries.append(draw(st.integers(-size, size - 1)))
        elif kind == "list":
            entries.append(draw(st.lists(st.integers(0, size - 1), min_size=length, max_size=length)))
        else:
            entries.append(slice(draw(st.integers(0, 1)), None, draw(st.integers(1, 2))))
    return tuple(entries)


@given(mixed_index())
def test_mixed_indices_agree_with_torch(index):
    torch = pytest.importorskip("torch")
    x = np.arange(24.0).reshape(2, 3, 4)
    t_index = tuple(ts.tensor(i) if isinstance(i, list) else i for i in index)
    want = torch.tensor(x)[tuple(torch.tensor(i) if isinstance(i, list) else i for i in index)]
    got = ts.tensor(x)[t_index]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


ERRORS = {  # each raises PyTorch's exception class, with the shapes, dims or dtypes in the message
    "broadcast": (RuntimeError, lambda lib: lib.ones(2, 3) + lib.ones(4)),
    "matmul": (RuntimeError, lambda lib: lib.ones(2, 3) @ lib.ones(2, 3)),
    "matmul_0d": (RuntimeError, lambda lib: lib.ones(()) @ lib.ones(3)),
    "matmul_dtypes": (RuntimeError, lambda lib: lib.ones(2, 3) @ lib.ones(3, 2, dtype=lib.float64)),
    "permute": (RuntimeError, lambda lib: lib.ones(2, 3).permute(0, 1, 2)),
    "permute_duplicate": (RuntimeError, lambda lib: lib.ones(2, 3).permute(1, 1)),
    "expand": (RuntimeError, lambda lib: lib.ones(3).expand(2, 4)),
    "cat": (RuntimeError, lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)])),
    "cat_ndim": (RuntimeError, lambda lib: lib.cat([lib.ones(2, 3), lib.ones(3)])),
    "cat_empty": (ValueError, lambda lib: lib.cat([])),
    "stack": (RuntimeError, lambda lib: lib.stack([lib.ones(2), lib.ones(3)])),
    "int_negative_power": (RuntimeError, lambda lib: lib.tensor([2]) ** -1),
    "view": (RuntimeError, lambda lib: lib.ones(4, 4).transpose(0, 1).view(16)),
    "reshape": (RuntimeError, lambda lib: lib.ones(4).reshape(3)),
    "dim_out_of_range": (IndexError, lambda lib: lib.ones(2).sum(3)),
    "item": (RuntimeError, lambda lib: lib.ones(2).item()),
    "bool": (RuntimeError, lambda lib: bool(lib.ones(2))),
    "negate_bool": (RuntimeError, lambda lib: -lib.tensor([True])),
    "mean_of_ints": (RuntimeError, lambda lib: lib.tensor([1]).mean()),
    "split": (RuntimeError, lambda lib: lib.ones(3).split([1, 1])),
    "chunk": (RuntimeError, lambda lib: lib.ones(3).chunk(0)),
    "narrow": (RuntimeError, lambda lib: lib.ones(4).narrow(0, 3, 2)),
    "flatten": (RuntimeError, lambda lib: lib.ones(2, 3).flatten(1, 0)),
    "tril_1d": (RuntimeError, lambda lib: lib.ones(3).tril()),
    "mT_1d": (RuntimeError, lambda lib: lib.ones(3).mT),
    "where": (RuntimeError, lambda lib: lib.where(lib.ones(2), lib.ones(2), lib.ones(2))),
    "masked_fill": (RuntimeError, lambda lib: lib.ones(2).masked_fill(lib.ones(2), 0)),
    "repeated_dims": (RuntimeError, lambda lib: lib.ones(2, 3).sum((0, 0))),
    "arange_step_0": (RuntimeError, lambda lib: lib.arange(0, 5, 0)),
    "negative_size": (RuntimeError, lambda lib: lib.zeros(-1)),
    "negative_step": (ValueError, lambda lib: lib.ones(4)[::-1]),
    "ragged": (ValueError, lambda lib: lib.tensor([[1, 2], [3]])),
    "index_out_of_range": (IndexError, lambda lib: lib.ones(2, 3)[lib.tensor([0, 2])]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs_classes(name):
    from tinytorch import autograd as ag
    error_class, fn = ERRORS[name]
    assert_raises(error_class, fn, ag)
    with contextlib.suppress(ImportError):
        import torch
        with pytest.raises(error_class):
            fn(torch)
