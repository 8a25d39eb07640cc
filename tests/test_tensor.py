"""Module 01's package (tinytorch.tensor_base) against numpy, on hypothesis-generated shapes and layouts."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch import tensor_base as tt
from tinytorch.testing import assert_raises

settings.register_profile("tinytorch", max_examples=60, deadline=None)
settings.load_profile("tinytorch")

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
float_dtypes = st.sampled_from([tt.float32, tt.float64])


@st.composite
def layouts(draw, shape=None):
    """A random strided layout over a fresh storage: any positive strides (including 0) and offset."""
    shape = draw(nonempty_shapes) if shape is None else shape
    strides = tuple(draw(st.integers(0, 6)) for _ in shape)
    offset = draw(st.integers(0, 5))
    extent = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    storage = np.arange(extent + draw(st.integers(0, 3)), dtype=np.float64) * 0.5 - 3
    return storage, shape, strides, offset


def numpy_layout(storage, shape, strides, offset):
    """The same layout made by numpy's own stride tricks (the oracle)."""
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(storage[offset:], shape, tuple(s * item for s in strides))


@given(shapes)
def test_contiguous_strides_match_numpy(shape):
    expected = tuple(s // 8 for s in np.zeros(shape).strides) if 0 not in shape else None
    strides = tt.contiguous_strides(shape)
    assert len(strides) == len(shape)
    if expected is not None:
        assert strides == expected
    # PyTorch's rule: each stride is the next stride times max(next size, 1)
    for i in range(len(shape) - 1):
        assert strides[i] == strides[i + 1] * max(shape[i + 1], 1)


def test_contiguous_strides_rejects_negative_sizes():
    assert_raises(RuntimeError, tt.contiguous_strides, (3, -2))


@given(layouts(), st.data())
def test_storage_index_and_strided_view_match_numpy(layout, data):
    storage, shape, strides, offset = layout
    oracle = numpy_layout(storage, shape, strides, offset)
    view = tt.strided_view(storage, shape, strides, offset)
    assert np.shares_memory(view, storage) or view.size == 0
    np.testing.assert_array_equal(view, oracle)
    index = tuple(data.draw(st.integers(-n, n - 1)) for n in shape)
    assert storage[tt.storage_index(index, shape, strides, offset)] == oracle[index]


@given(layouts(), st.data())
def test_storage_index_rejects_out_of_range(layout, data):
    storage, shape, strides, offset = layout
    if not shape:
        return
    dim = data.draw(st.integers(0, len(shape) - 1))
    bad = data.draw(st.sampled_from([shape[dim], -shape[dim] - 1]))
    index = tuple(bad if d == dim else 0 for d in range(len(shape)))
    error = assert_raises(IndexError, tt.storage_index, index, shape, strides, offset)
    assert str(dim) in str(error) and str(shape[dim]) in str(error)


@given(st.recursive(st.integers(-5, 5), lambda children: st.lists(children, min_size=1, max_size=3)))
def test_flatten_nested_matches_numpy_or_reports_ragged(data):
    try:
        array = np.array(data)
    except ValueError:
        assert_raises(ValueError, tt.flatten_nested, data, match="ragged")
        return
    shape, values = tt.flatten_nested(data)
    assert shape == array.shape and values == array.reshape(-1).tolist()


def test_flatten_nested_rejects_non_numbers():
    for bad in ["a", None, [1, {}], [[1], ["x"]]]:
        assert_raises(TypeError, tt.flatten_nested, bad)


# PyTorch's promotion table for the cases the course teaches (from its documented rules).
PROMOTIONS = [
    ((tt.float32, (2,)), 2.5, tt.float32),
    ((tt.int64, (2,)), 2.5, tt.float32),
    ((tt.int32, (2,)), 7, tt.int32),
    ((tt.bool_, (2,)), 1, tt.int64),
    ((tt.bool_, (2,)), True, tt.bool_),
    ((tt.float32, (2,)), (tt.float64, ()), tt.float32),
    ((tt.int64, (2,)), (tt.float64, ()), tt.float64),
    ((tt.int32, (2,)), (tt.int64, ()), tt.int32),
    ((tt.float32, (2,)), (tt.float64, (2,)), tt.float64),
    ((tt.int32, (2,)), (tt.int64, (2,)), tt.int64),
    ((tt.float64, ()), (tt.float32, ()), tt.float64),
    ((tt.int32, ()), (tt.float64, ()), tt.float64),
]


def make_operand(spec):
    if isinstance(spec, tuple):
        dtype, shape = spec
        return tt.zeros(shape, dtype=dtype)
    return spec


@pytest.mark.parametrize("a, b, expected", PROMOTIONS)
def test_result_type_follows_pytorch(a, b, expected):
    a, b = make_operand(a), make_operand(b)
    assert tt.result_type(a, b) is expected
    assert (a + b).dtype is expected and (b + a).dtype is expected


@pytest.mark.parametrize("a, b, expected", PROMOTIONS)
def test_result_type_agrees_with_torch(a, b, expected):
    torch = pytest.importorskip("torch")

    def to_torch(x):
        return torch.zeros(x.shape, dtype=getattr(torch, x.dtype.name)) if isinstance(x, tt.Tensor) else x
    got = (to_torch(make_operand(a)) + to_torch(make_operand(b))).dtype
    assert str(got) == f"torch.{expected.name}"


BINARY = [("+", np.add), ("-", np.subtract), ("*", np.multiply), ("/", np.divide),
          ("==", np.equal), ("<", np.less), (">=", np.greater_equal)]


@given(layouts(), st.data(), st.sampled_from(BINARY))
@np.errstate(divide="ignore", invalid="ignore")
def test_elementwise_ops_read_through_layouts(layout, data, op):
    symbol, np_op = op
    storage, shape, strides, offset = layout
    a = tt.Tensor(storage, shape, strides, offset)
    b_np = data.draw(st.floats(-4, 4).filter(lambda v: abs(v) > 0.1).map(
        lambda v: np.full(shape, v)))
    b = tt.tensor(b_np)
    expected = np_op(numpy_layout(storage, shape, strides, offset), b_np)
    got = eval(f"a {symbol} b")
    assert got.shape == shape and got.storage is not storage
    np.testing.assert_allclose(got.numpy(), expected)
    got_scalar = eval(f"a {symbol} 1.5")
    np.testing.assert_allclose(got_scalar.numpy(), np_op(a.numpy(), 1.5))
    reflected = eval(f"1.5 {symbol} a")
    np.testing.assert_allclose(reflected.numpy(), np_op(1.5, a.numpy()))


@given(nonempty_shapes, float_dtypes)
def test_unary_ops_match_numpy(shape, dtype):
    x_np = np.random.default_rng(len(shape)).uniform(0.1, 3, size=shape).astype(dtype.numpy_dtype)
    x = tt.tensor(x_np)
    for got, want in [(x.exp(), np.exp(x_np)), (x.log(), np.log(x_np)), (x.sqrt(), np.sqrt(x_np)),
                      (-x, -x_np), (abs(-x), x_np), (x ** 2, x_np ** 2), (x ** 3, x_np ** 3),
                      (x ** 0.5, x_np ** 0.5), (2 ** x, 2 ** x_np)]:
        assert got.dtype is dtype and got.shape == shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_integer_and_bool_rules():
    i = tt.tensor([1, 2, 3])
    assert i.dtype is tt.int64 and (i / 2).dtype is tt.float32
    assert i.exp().dtype is tt.float32 and (i ** 2).dtype is tt.int64
    assert_raises(RuntimeError, lambda: i ** -1, match="negative")
    assert_raises(RuntimeError, lambda: -tt.tensor([True]))
    assert (tt.tensor([True, False]) + tt.tensor([True, True])).tolist() == [True, True]


def test_division_by_zero_gives_inf_quietly(recwarn):
    x = tt.tensor([1.0, 0.0, -1.0])
    assert (x / 0).tolist()[0] == float("inf") and np.isnan((x / 0).tolist()[1])
    assert (1 / tt.zeros(2)).tolist() == [float("inf")] * 2 and tt.tensor([0.0]).log().item() == -float("inf")
    assert not recwarn.list


def test_shape_mismatch_names_both_shapes():
    error = assert_raises(RuntimeError, lambda: tt.zeros(2, 3) + tt.zeros(3))
    assert "(2, 3)" in str(error) and "(3,)" in str(error)
    assert (tt.zeros(2, 3) + tt.tensor(1.0)).shape == (2, 3)


@given(nonempty_shapes)
def test_factories_match_numpy(shape):
    assert tt.zeros(shape).tolist() == np.zeros(shape).tolist() and tt.zeros(shape).dtype is tt.float32
    assert tt.ones(*shape).tolist() == np.ones(shape).tolist()
    assert tt.full(shape, 7).dtype is tt.int64 and tt.full(shape, 7).tolist() == np.full(shape, 7).tolist()
    assert tt.full(shape, 2.5).dtype is tt.float32
    like = tt.ones(shape, dtype=tt.float64)
    assert tt.zeros_like(like).dtype is tt.float64 and tt.full_like(like, 3).tolist() == np.full(shape, 3.0).tolist()


@pytest.mark.parametrize("args", [(5,), (2, 9), (1, 2, 0.25), (10, 0, -3), (0.5, 3)])
def test_arange_matches_numpy(args):
    got = tt.arange(*args)
    want = np.arange(*args)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert got.dtype is (tt.int64 if all(isinstance(a, int) for a in args) else tt.float32)


def test_randn_is_seedable_and_standard_normal():
    a = tt.randn(1000, 100, generator=tt.Generator(3))
    b = tt.randn(1000, 100, generator=tt.Generator(3))
    assert a.tolist() == b.tolist() and a.dtype is tt.float32
    values = a.numpy()
    assert abs(values.mean()) < 0.01 and abs(values.std() - 1) < 0.01
    tt.manual_seed(5)
    first = tt.randn(4)
    tt.manual_seed(5)
    assert tt.randn(4).tolist() == first.tolist()
    assert_raises(RuntimeError, tt.randn, 2, dtype=tt.int64)


def test_tensor_from_data_and_dtype_errors():
    assert tt.tensor([[1, 2], [3, 4]]).dtype is tt.int64
    assert tt.tensor([1, 2.5]).dtype is tt.float32
    assert tt.tensor([True, False]).dtype is tt.bool_
    assert tt.tensor(np.array([1.0, 2.0])).dtype is tt.float64
    assert tt.tensor(3).shape == () and tt.tensor([]).shape == (0,)
    assert_raises(ValueError, tt.tensor, [[1, 2], [3]], match="ragged")
    assert_raises(TypeError, tt.tensor, np.array([1, 2], dtype=np.uint8), match="unsupported dtype")
    assert_raises(TypeError, tt.zeros, 2, dtype="complex64", match="unsupported dtype")


def test_elements_views_and_numpy_sharing():
    t = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    element = t[1, -1]
    assert element.shape == () and element.storage is t.storage and element.item() == 6.0
    t[1, 2] = 60
    assert element.item() == 60.0
    t.numpy()[0, 0] = -1
    assert t[0, 0].item() == -1.0, "numpy() must share memory"
    assert t.numel() == 6 and t.dim() == 2 and t.size(1) == 3 and t.stride() == (3, 1)
    assert_raises(RuntimeError, t.item)
    assert_raises(IndexError, t.__getitem__, (0,))
    assert_raises(IndexError, t.__getitem__, (2, 0))
    assert_raises(RuntimeError, lambda: bool(t))
    assert_raises(RuntimeError, tt.Tensor, np.zeros(4, np.float32), (2, 3))


REPRS = [
    (lambda: tt.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    (lambda: tt.tensor([0.5, 2.25]), "tensor([0.5000, 2.2500])"),
    (lambda: tt.tensor([1, 22, 3]), "tensor([ 1, 22,  3])"),
    (lambda: tt.tensor([True, False]), "tensor([ True, False])"),
    (lambda: tt.tensor(3.0, dtype=tt.float64), "tensor(3., dtype=tinytorch.float64)"),
    (lambda: tt.tensor([1, 2], dtype=tt.int32), "tensor([1, 2], dtype=tinytorch.int32)"),
    (lambda: tt.zeros(2, 0), "tensor([], size=(2, 0))"),
    (lambda: tt.tensor([1e-5, 1.0]), "tensor([1.0000e-05, 1.0000e+00])"),
]


@pytest.mark.parametrize("make, expected", REPRS)
def test_repr_prints_like_pytorch(make, expected):
    assert repr(make()) == expected


@pytest.mark.parametrize("make, expected", REPRS)
def test_repr_agrees_with_torch(make, expected):
    torch = pytest.importorskip("torch")
    t = make()
    theirs = repr(torch.from_numpy(t.numpy().copy()))
    assert repr(t) == theirs.replace("torch.", "tinytorch.")


def test_plot_layout_draws_every_element():
    import matplotlib
    matplotlib.use("Agg")
    t = tt.arange(6)
    ax = tt.plot_layout(tt.Tensor(t.storage, (3, 2), (1, 3), 0))
    assert len(ax.patches) == 6 + 6  # six storage boxes, six tensor boxes
    assert_raises(ValueError, tt.plot_layout, tt.zeros(1, 1, 1))
    labels = [text.get_text() for text in ax.texts]
    assert labels.count("tensor") == 1 and labels.count("storage") == 1
