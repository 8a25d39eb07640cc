"""Issue #42, the tensor level: PyTorch's names (dtype aliases, `pow`, devices), PyTorch's results and errors
(`flip(())`, bitwise wrapping, `view(dtype)`, `cat` of 0-d tensors, "out of bounds", int32 indices, `axis=`),
and the ops of module 03's companion (`isclose`, `einsum`, `cummax`/`cummin`/`cumprod`, `scatter_reduce`,
`copysign`, `exp2`, `div(rounding_mode=)`): checked against numpy and finite differences, and against
PyTorch where it is installed (the optional oracle; those tests skip without it)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tinytorch as tt
from tinytorch import autograd as ag
from tinytorch import autograd_more as more

settings.register_profile("tinytorch-surface", max_examples=20, deadline=None)
settings.load_profile("tinytorch-surface")

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def leaf(array):
    return tt.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def raised(fn):
    """(type, message) of what `fn()` raises, or None."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - every class is compared
        return type(error), str(error)
    return None


# ----- names --------------------------------------------------------------------------------------
def test_dtype_aliases_are_the_dtypes():
    assert (tt.long, tt.int, tt.float, tt.double, tt.bool) == (tt.int64, tt.int32, tt.float32, tt.float64,
                                                               tt.bool_)
    assert tt.arange(3, dtype=tt.long).dtype is tt.int64 and tt.zeros(2, dtype=tt.double).dtype is tt.float64
    assert raised(lambda: tt.uint8)[0] is AttributeError  # not supported: docs/pytorch.md lists it
    assert not {"int", "float", "bool"} & set(vars(more))  # read by the module's __getattr__: no builtin hidden
    assert more.int is tt.int32 and raised(lambda: more.half)[0] is AttributeError


def test_pow_function():
    x = tt.tensor([1.0, 2.0, 3.0])
    assert tt.pow(x, 2).tolist() == [1.0, 4.0, 9.0] and tt.pow(2, x).tolist() == [2.0, 4.0, 8.0]


# ----- devices ------------------------------------------------------------------------------------
def test_device_objects():
    cpu = tt.device("cpu")
    assert (cpu.type, cpu.index, str(cpu), repr(cpu)) == ("cpu", None, "cpu", "device(type='cpu')")
    assert str(tt.device("cpu", 0)) == "cpu:0" and tt.device("cpu:0") == tt.device("cpu", 0) != cpu
    assert tt.device("cuda:1").index == 1 and tt.device(0) == tt.device("cuda", 0)
    assert tt.device(cpu) == cpu and len({cpu, tt.device("cpu")}) == 1 and cpu != "cpu"
    kind, message = raised(lambda: tt.device("nope"))
    assert kind is RuntimeError and message.startswith("Expected one of cpu, cuda, ") and \
        message.endswith("device type at start of device string: nope")
    assert raised(lambda: tt.device("cpu:x")) == (RuntimeError, "Invalid device string: 'cpu:x'")
    assert raised(lambda: tt.device("cpu", -1)) == (RuntimeError, "Device index must not be negative")
    assert raised(lambda: tt.device("cuda:1", 0))[0] is RuntimeError


FACTORIES = {
    "tensor": lambda **k: tt.tensor([1, 2], **k), "zeros": lambda **k: tt.zeros(2, 3, **k),
    "ones": lambda **k: tt.ones(2, **k), "empty": lambda **k: tt.empty(2, **k), "full": lambda **k: tt.full((2,), 7, **k),
    "arange": lambda **k: tt.arange(0, 5, **k), "randn": lambda **k: tt.randn(2, **k),
    "rand": lambda **k: tt.rand(2, **k), "randint": lambda **k: tt.randint(0, 5, (3,), **k),
    "eye": lambda **k: tt.eye(3, **k), "linspace": lambda **k: tt.linspace(0, 1, 5, **k),
    "zeros_like": lambda **k: tt.zeros_like(tt.ones(2), **k), "ones_like": lambda **k: tt.ones_like(tt.ones(2), **k),
    "full_like": lambda **k: tt.full_like(tt.ones(2), 3.0, **k), "empty_like": lambda **k: tt.empty_like(tt.ones(2), **k),
    "rand_like": lambda **k: tt.rand_like(tt.ones(2), **k), "randn_like": lambda **k: tt.randn_like(tt.ones(2), **k),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_factories_take_the_cpu_and_refuse_other_devices(name):
    make = FACTORIES[name]
    tt.manual_seed(0)
    plain = make()
    for where in ("cpu", "cpu:0", tt.device("cpu"), None):
        tt.manual_seed(0)
        made = make(device=where)
        assert made.device == tt.device("cpu") and made.dtype is plain.dtype and made.tolist() == plain.tolist()
    assert raised(lambda: make(device="cuda")) == (AssertionError, "Torch not compiled with CUDA enabled")
    assert raised(lambda: make(device=tt.device("cuda", 0)))[0] is AssertionError
    assert raised(lambda: make(device="mps"))[0] is NotImplementedError
    assert raised(lambda: make(device="gpu"))[0] is RuntimeError


def test_like_factories_keep_shape_and_dtype_and_take_requires_grad():
    x = tt.ones(2, 3, dtype=tt.float64)
    for made in (tt.zeros_like(x), tt.ones_like(x), tt.full_like(x, 2.0), tt.randn_like(x), tt.rand_like(x)):
        assert made.shape == (2, 3) and made.dtype is tt.float64
    assert tt.zeros_like(x, requires_grad=True).requires_grad and tt.ones_like(x, dtype=tt.long).dtype is tt.int64


def test_to_device_dtype_and_other_tensor():
    x = tt.tensor([[1.5, -2.0]], requires_grad=True)
    assert x.device == tt.device("cpu") and x.is_cuda is False
    assert x.to("cpu") is x and x.to(tt.device("cpu")) is x and x.cpu() is x
    y = x.to("cpu", copy=True)
    assert y is not x and y.tolist() == x.tolist() and y.requires_grad
    assert x.to("cpu", tt.float64).dtype is tt.float64 and x.to(device="cpu", dtype=tt.long).tolist() == [[1, -2]]
    assert x.to(tt.ones(1, dtype=tt.int32)).dtype is tt.int32 and x.to("int64").dtype is tt.int64
    x.to("cpu", tt.float64).sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0]] and x.grad.dtype is tt.float32
    assert raised(lambda: x.to("cuda")) == (AssertionError, "Torch not compiled with CUDA enabled")
    assert raised(lambda: x.cuda())[0] is AssertionError
    assert raised(lambda: x.to(tt.float32, tt.float32))[0] is TypeError
    assert (tt.cuda.is_available(), tt.cuda.device_count()) == (False, 0)
    tt.cuda.manual_seed(0)  # nothing to seed, as in a PyTorch without CUDA


# ----- results PyTorch gives --------------------------------------------------------------------------
def test_flip_of_no_dims_is_an_unchanged_copy():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x.flip(())
    assert y.tolist() == x.tolist() and y.storage is not x.storage
    (y * tt.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert tt.flip(x, (0, 1)).tolist() == [[4.0, 3.0], [2.0, 1.0]] and x.flip(0, 1).tolist() == [[4.0, 3.0], [2.0, 1.0]]
    assert raised(lambda: x.flip()) == (TypeError, 'flip() missing 1 required positional arguments: "dims"')
    assert raised(lambda: x.flip((0, 0))) == (RuntimeError, "dim 0 appears multiple times in the list of dims")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("value", [0xFFFFFFFF, 0x1FFFFFFFF, -0x80000001, 2 ** 63 + 5, 2 ** 64 - 1, -2 ** 63])
@pytest.mark.parametrize("op", ["__or__", "__and__", "__xor__", "__ror__"])
def test_bitwise_ops_wrap_python_ints_to_the_tensor_width(dtype, value, op):
    a = np.array([1, -2, 0x7FFF0000], dtype)
    wrapped = np.array(value % 2 ** 64, np.uint64).astype(dtype)  # two's complement: numpy's cast wraps
    want = getattr(a, op)(wrapped)
    assert getattr(tt.tensor(a), op)(value).tolist() == want.tolist()
    assert getattr(tt.tensor(a), op)(value).dtype.name == dtype


def test_bitwise_ops_refuse_ints_past_64_bits():
    for value in (2 ** 64, -2 ** 63 - 1):
        kind, message = raised(lambda: tt.tensor([1], dtype=tt.int32) | value)
        assert kind is OverflowError and message.startswith("int too big to convert")


@pytest.mark.parametrize("old,new", [(a, b) for a in ("float32", "float64", "int32", "int64", "bool")
                                     for b in ("float32", "float64", "int32", "int64", "bool")])
def test_view_dtype_reads_the_same_bytes(old, new):
    data = np.random.default_rng(3).integers(0, 2, (2, 8)).astype(old) if old == "bool" else \
        np.random.default_rng(3).standard_normal((2, 8)).astype(old)
    x = tt.tensor(data)
    got, want = x.view(new).numpy(), data.view(new)  # compared as bytes: NaNs among the values
    assert got.shape == want.shape and got.tobytes() == want.tobytes() and x.view(getattr(tt, new)).dtype.name == new
    y = x.view(new)  # a view: it shares the storage
    y[0] = tt.zeros(y.shape[1:], dtype=getattr(tt, new))
    assert not x[0].numpy().any()


def test_view_dtype_layout_and_errors_as_pytorch():
    x = tt.arange(12, dtype=tt.float32).reshape(3, 4)
    sliced = x[1:, 2:].view(tt.float64)  # offset 6, stride 4: both divisible by 2
    assert sliced.tolist() == x.numpy()[1:, 2:].copy().view(np.float64).tolist()
    assert x.t().view(tt.int32).tolist() == x.numpy().T.view(np.int32).tolist()  # same size: any layout
    small = tt.arange(3, dtype=tt.int64)[1:].view(tt.int32)
    assert small.tolist() == [1, 0, 2, 0] and small.stride() == (1,)
    why = "to view Float as Double (different element sizes)"
    assert raised(lambda: tt.tensor(1.0).view(tt.float64)) == (RuntimeError, f"self.dim() cannot be 0 {why}")
    assert raised(lambda: x.t().view(tt.float64)) == (RuntimeError, f"self.stride(-1) must be 1 {why}, but got 4")
    assert raised(lambda: x[:, :3].view(tt.float64)) == (
        RuntimeError, f"self.size(-1) must be divisible by 2 {why}, but got 3")
    assert raised(lambda: tt.arange(15, dtype=tt.float32).reshape(3, 5)[:, :2].view(tt.float64)) == (
        RuntimeError, f"self.stride(0) must be divisible by 2 {why}, but got 5")
    assert raised(lambda: x.reshape(-1)[1:3].view(tt.float64)) == (
        RuntimeError, f"self.storage_offset() must be divisible by 2 {why}, but got 1")
    leaf_ = tt.ones(2, requires_grad=True)
    assert not leaf_.view(tt.float64).requires_grad  # not differentiable, as in PyTorch


def test_cat_of_zero_dim_tensors_and_out_of_bounds_messages():
    assert raised(lambda: tt.cat([tt.tensor(1.0), tt.tensor(2.0)])) == (
        RuntimeError, "zero-dimensional tensor (at position 0) cannot be concatenated")
    assert raised(lambda: tt.cat([tt.zeros(2), tt.tensor(2.0)])) == (
        RuntimeError, "zero-dimensional tensor (at position 1) cannot be concatenated")
    assert tt.stack([tt.tensor(1.0), tt.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert raised(lambda: tt.zeros(3)[5]) == (IndexError, "index 5 is out of bounds for dimension 0 with size 3")
    assert raised(lambda: tt.zeros(3, 4)[1, 7]) == (IndexError, "index 7 is out of bounds for dimension 1 with size 4")
    assert raised(lambda: tt.zeros(3).gather(0, tt.tensor([5]))) == (
        RuntimeError, "index 5 is out of bounds for dimension 0 with size 3")


def test_int32_indices_for_gather_and_scatter():
    x = leaf(np.arange(6.0).reshape(2, 3))
    i64 = tt.tensor([[2, 0], [1, 1]])
    i32 = i64.to(tt.int32)
    assert x.gather(1, i32).tolist() == x.gather(1, i64).tolist() == [[2.0, 0.0], [4.0, 4.0]]
    assert x.detach().scatter(1, i32, 9.0).tolist() == x.detach().scatter(1, i64, 9.0).tolist()
    x.gather(1, i32).sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 1.0], [0.0, 2.0, 0.0]]
    assert raised(lambda: x.gather(1, i64.float())) == (
        RuntimeError, "gather(): Expected dtype int32/int64 for index, got tinytorch.float32")


@given(shapes, st.integers(0, 10 ** 6))
def test_axis_is_dim(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    x, axis = tt.tensor(a), len(shape) - 1
    assert np.allclose(x.sum(axis=axis).numpy(), a.sum(axis)) and np.allclose(x.mean(axis=axis).numpy(), a.mean(axis))
    assert x.max(axis=axis).values.tolist() == a.max(axis).tolist() == x.max(dim=axis).values.tolist()
    assert x.min(axis=axis, keepdim=True).values.tolist() == a.min(axis, keepdims=True).tolist()
    assert (x > 0).any(axis=axis).tolist() == (a > 0).any(axis).tolist()
    assert (x > 0).all(axis=axis).tolist() == (a > 0).all(axis).tolist()
    assert raised(lambda: x.sum(0, axis=0))[0] is TypeError


# ----- ops -------------------------------------------------------------------------------------------
@given(shapes, st.integers(0, 10 ** 6), st.booleans())
def test_isclose_is_numpys(shape, seed, equal_nan):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    b = a + rng.choice([0.0, 1e-9, 1e-6, 1e-3, np.nan, np.inf], size=shape)
    a[rng.random(shape) < 0.2] = np.nan
    got = tt.isclose(tt.tensor(a), tt.tensor(b), equal_nan=equal_nan)
    assert got.dtype is tt.bool_ and got.tolist() == np.isclose(a, b, equal_nan=equal_nan).tolist()
    assert tt.tensor(a).isclose(tt.tensor(b), rtol=0.1, atol=0.01).tolist() == np.isclose(a, b, 0.1, 0.01).tolist()


def test_isclose_errors():
    x = tt.tensor([1.0])
    assert raised(lambda: x.isclose(1.0)) == (TypeError, "isclose(): argument 'other' (position 1) must be Tensor, not float")
    assert raised(lambda: tt.tensor([1]).isclose(x)) == (RuntimeError, "Long did not match Float")
    assert raised(lambda: x.isclose(x, rtol=-1)) == (RuntimeError, "rtol must be greater than or equal to zero, but got -1")


EINSUMS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii", [(3, 3)]), ("ii->i", [(3, 3)]),
           ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("bij,bjk->bik", [(1, 2, 3), (5, 3, 4)]),
           ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]), ("i,j->ij", [(2,), (3,)]), ("i,i->", [(4,), (4,)]),
           ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("iij->ji", [(2, 2, 3)]), ("ijk,jil->kl", [(2, 3, 2), (3, 2, 4)]),
           ("Ab,bc->cA", [(2, 3), (3, 2)]), ("i j , j k -> i k", [(2, 3), (3, 4)]), ("...->...", [(2, 3)]),
           ("ba,a", [(3, 2), (2,)]), ("i,i,i->i", [(3,), (3,), (3,)])]


@pytest.mark.parametrize("equation,operand_shapes", EINSUMS)
def test_einsum_matches_numpy_and_finite_differences(equation, operand_shapes):
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal(s) for s in operand_shapes]
    want = np.einsum(equation.replace(" ", ""), *arrays)
    assert np.allclose(tt.einsum(equation, *[tt.tensor(a) for a in arrays]).numpy(), want)
    assert np.allclose(tt.einsum(equation, [tt.tensor(a) for a in arrays]).numpy(), want)
    assert ag.gradcheck(lambda *ts: tt.einsum(equation, *ts), tuple(leaf(a) for a in arrays))


@st.composite
def einsum_cases(draw):
    """A random equation of one to three operands over the letters "abcd" (a letter may repeat within an operand:
    a diagonal), an output of distinct letters in any order, and one size per letter."""
    sizes = {c: draw(st.integers(1, 3)) for c in "abcd"}
    terms = draw(st.lists(st.text("abcd", min_size=0, max_size=3), min_size=1, max_size=3))
    used = sorted(set("".join(terms)))
    output = draw(st.permutations(used)).__getitem__(slice(draw(st.integers(0, len(used)))))
    return f"{','.join(terms)}->{''.join(output)}", [tuple(sizes[c] for c in term) for term in terms]


@given(einsum_cases(), st.integers(0, 10 ** 6))
def test_einsum_of_random_equations(case, seed):
    equation, operand_shapes = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in operand_shapes]
    assert np.allclose(tt.einsum(equation, *[tt.tensor(a) for a in arrays]).numpy(), np.einsum(equation, *arrays))
    assert ag.gradcheck(lambda *ts: tt.einsum(equation, *ts), tuple(leaf(a) for a in arrays))


def test_einsum_keeps_integer_dtype_and_gives_pytorchs_errors():
    assert tt.einsum("i,i->", tt.tensor([1, 2, 3], dtype=tt.int32), tt.tensor([4, 5, 6], dtype=tt.int32)).dtype is tt.int32
    a, b = tt.ones(2, 3), tt.ones(4, 4)
    for args, message in [
        (("ij,jk->ik", a, b), "einsum(): subscript j has size 4 for operand 1 which does not broadcast with "
                              "previously seen size 3"),
        (("ij,jk->ik", a), "einsum(): fewer operands were provided than specified in the equation"),
        (("ij->ik", a), "einsum(): output subscript k does not appear in the equation for any input operand"),
        (("ijk->ij", a), "einsum(): the number of subscripts in the equation (3) does not match the number of "
                         "dimensions (2) for operand 0 and no ellipsis was given"),
        (("ij,j->i", a, tt.ones(3, dtype=tt.long)), "expected scalar type Float but found Long"),
        (("ij->jj", b), "einsum(): output subscript j appears more than once in the output"),
        (("i1->i", a), "einsum(): invalid subscript given at index 1 in the equation string, subscripts must be "
                       "in [a-zA-Z]"),
        (("ii->i", a), "einsum(): subscript i is repeated for operand 0 but the sizes don't match, 3 != 2")]:
        assert raised(lambda: tt.einsum(*args)) == (RuntimeError, message)
    assert raised(lambda: tt.einsum(a, [0, 1]))[0] is TypeError  # the sublist form: not supported


def cumulative_extreme(a, dim, better):
    """cummax/cummin by a plain loop: a tie moves the index forward; a NaN wins and stays."""
    a = np.moveaxis(a, dim, -1)
    values, indices = np.empty_like(a), np.zeros(a.shape, np.int64)
    for row in np.ndindex(a.shape[:-1]):
        best = 0
        for k in range(a.shape[-1]):
            if not np.isnan(a[row][best]) and (np.isnan(a[row][k]) or better(a[row][k], a[row][best])):
                best = k
            values[row + (k,)], indices[row + (k,)] = a[row][best], best
    return np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)


@pytest.mark.parametrize("name,better", [("cummax", np.greater_equal), ("cummin", np.less_equal)])
@given(shapes, st.integers(0, 10 ** 6), st.booleans())
def test_cummax_cummin_values_indices_and_gradient(name, better, shape, seed, ties):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, shape).astype(np.float64) if ties else rng.standard_normal(shape)
    dim = int(rng.integers(-len(shape), len(shape)))
    values, indices = getattr(tt, name)(tt.tensor(a), dim)
    want_values, want_indices = cumulative_extreme(a, dim, better)
    assert values.tolist() == want_values.tolist() and indices.tolist() == want_indices.tolist()
    assert indices.dtype is tt.int64
    if not ties:  # distinct values: differentiable
        assert ag.gradcheck(lambda t: getattr(t, name)(dim).values, (leaf(a),))
    x = leaf(a)
    getattr(x, name)(dim).values.sum().backward()  # each value's gradient goes to the element it came from
    grad = np.zeros_like(a)
    np.add.at(np.moveaxis(grad, dim, -1), tuple(np.indices(np.moveaxis(a, dim, -1).shape)[:-1])
              + (np.moveaxis(want_indices, dim, -1),), 1)
    assert x.grad.tolist() == grad.tolist()


def test_cummax_with_nan_and_zero_dim():
    values, indices = tt.tensor([1.0, float("nan"), 3.0]).cummax(0)
    assert np.isnan(values.numpy()[1:]).all() and indices.tolist() == [0, 1, 1]
    values, indices = tt.tensor(3.0).cummin(0)
    assert values.item() == 3.0 and indices.item() == 0


@given(shapes, st.integers(0, 10 ** 6))
def test_cumprod_with_zeros_matches_numpy_and_finite_differences(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    a[rng.random(shape) < 0.3] = 0.0  # zeros, even two in a row: the gradient must stay exact
    dim = int(rng.integers(-len(shape), len(shape)))
    assert np.allclose(tt.tensor(a).cumprod(dim).numpy(), np.cumprod(a, axis=dim))
    assert ag.gradcheck(lambda t: t.cumprod(dim), (leaf(a),))


def test_cumprod_dtypes():
    assert tt.tensor([1, 2, 3], dtype=tt.int32).cumprod(0).dtype is tt.int64
    assert tt.tensor([True, True]).cumprod(0).tolist() == [1, 1]
    assert tt.cumprod(tt.tensor([1, 2, 3]), 0, dtype=tt.float32).tolist() == [1.0, 2.0, 6.0]


def scatter_reduce_loop(x, index, src, reduce, include_self):
    """scatter_reduce along dim 0 of 1-d arrays, by a plain loop."""
    groups = {i: ([x[i]] if include_self else []) for i in range(len(x))}
    for i, v in zip(index, src):
        groups[i].append(v)
    out = x.copy()
    for i, vs in groups.items():
        if i in set(index.tolist()):
            out[i] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vs)
    return out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@given(st.integers(0, 10 ** 6))
def test_scatter_reduce_matches_a_loop_and_finite_differences(reduce, include_self, seed):
    rng = np.random.default_rng(seed)
    x, src = rng.standard_normal(5), rng.standard_normal(7)
    index = rng.integers(0, 5, 6)
    if reduce == "prod":
        x[rng.random(5) < 0.3], src[rng.random(7) < 0.3] = 0.0, 0.0  # zeros among the factors
    got = tt.tensor(x).scatter_reduce(0, tt.tensor(index), tt.tensor(src), reduce, include_self=include_self)
    assert np.allclose(got.numpy(), scatter_reduce_loop(x, index, src[:6], reduce, include_self))
    assert ag.gradcheck(lambda a, b: tt.scatter_reduce(a, 0, tt.tensor(index), b, reduce, include_self=include_self),
                        (leaf(x), leaf(src)))


def test_scatter_reduce_ties_share_the_gradient_and_integer_mean_floors():
    x, src = leaf([1.0, 5.0, 3.0, 4.0]), leaf([1.0, 5.0, 3.0, 4.0, 5.0, 5.0])
    index = tt.tensor([0, 1, 0, 1, 2, 1])
    x.scatter_reduce(0, index, src, "amax").sum().backward()
    assert np.allclose(x.grad.numpy(), [0, 1 / 3, 0, 1]) and np.allclose(src.grad.numpy(), [0, 1 / 3, 1, 0, 1, 1 / 3])
    got = tt.tensor([1, 2, 3, 4]).scatter_reduce(0, index, tt.tensor([1, 2, 3, 4, 5, 6]), "mean")
    assert got.tolist() == [1, 3, 4, 4]
    assert raised(lambda: tt.zeros(4).scatter_reduce(0, index, tt.ones(6), "max"))[0] is RuntimeError
    assert raised(lambda: tt.zeros(4).scatter_reduce(0, index, tt.ones(3), "sum")) == (
        RuntimeError, "Expected index [6] to be no larger than self [4] apart from dimension 0 and to be no larger "
                      "size than src [3]")


@given(shapes, st.integers(0, 10 ** 6))
def test_copysign_exp2_and_rounded_division(shape, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shape) * 5, rng.standard_normal(shape)
    assert np.allclose(tt.tensor(a).copysign(tt.tensor(b)).numpy(), np.copysign(a, b))
    assert ag.gradcheck(lambda x: x.copysign(tt.tensor(b)), (leaf(a),))
    assert np.allclose(tt.tensor(a).exp2().numpy(), np.exp2(a)) and ag.gradcheck(lambda x: x.exp2(), (leaf(a),))
    assert np.allclose(tt.div(tt.tensor(a), tt.tensor(b), rounding_mode="trunc").numpy(), np.trunc(a / b))
    assert np.allclose(tt.tensor(a).div(tt.tensor(b), rounding_mode="floor").numpy(), np.floor_divide(a, b))
    ints, divisors = rng.integers(-20, 20, shape), rng.choice([-7, -3, -1, 1, 2, 5], shape)
    assert tt.tensor(ints).div(tt.tensor(divisors), rounding_mode="trunc").tolist() == \
        (np.sign(ints) * np.sign(divisors) * (np.abs(ints) // np.abs(divisors))).tolist()
    assert tt.tensor(ints).div(tt.tensor(divisors), rounding_mode="floor").tolist() == (ints // divisors).tolist()
    x = leaf(a)
    x.div(2.0, rounding_mode="floor").sum().backward()
    assert not x.grad.numpy().any()  # PyTorch's gradient of a rounded quotient: 0


def test_copysign_exp2_div_dtypes_and_errors():
    assert tt.tensor([1, -2]).copysign(-1).dtype is tt.float32 and tt.tensor([1, 2]).exp2().dtype is tt.float32
    assert tt.tensor([7, -7]).div(2).tolist() == [3.5, -3.5] and tt.div(tt.tensor([7]), 2, rounding_mode="floor").dtype is tt.int64
    assert raised(lambda: tt.tensor([7]).div(2, rounding_mode="nope")) == (
        RuntimeError, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'nope'")
    assert raised(lambda: tt.tensor([7]).div(0, rounding_mode="trunc"))[0] is RuntimeError
    assert np.isinf(tt.tensor([7.0]).div(0.0, rounding_mode="trunc").numpy()).all()
    leaf_ = tt.tensor([0.0, 2.0], requires_grad=True)
    leaf_.copysign(-1.0).sum().backward()
    assert leaf_.grad.tolist() == [0.0, -1.0]  # PyTorch's: 0 where the input is 0


# ----- the oracle: PyTorch itself, where installed --------------------------------------------------------
ORACLE = {
    "flip(())": lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).flip(()),
    "int32 | 0xFFFFFFFF": lambda m: m.tensor([1, 2], dtype=m.int32) | 0xFFFFFFFF,
    "int32 & -0x80000001": lambda m: m.tensor([1, 2], dtype=m.int32) & -0x80000001,
    "int64 ^ 2**64-1": lambda m: m.tensor([1, 2]) ^ (2 ** 64 - 1),
    "bool | 0xFFFFFFFF": lambda m: m.tensor([True]) | 0xFFFFFFFF,
    "view float->int32": lambda m: m.arange(6, dtype=m.float32).reshape(2, 3).view(m.int32),
    "view int64->int32": lambda m: m.arange(4, dtype=m.int64).view(m.int32),
    "view int32->bool": lambda m: m.arange(4, dtype=m.int32).view(m.bool),
    "view t() int32": lambda m: m.arange(6, dtype=m.float32).reshape(2, 3).t().view(m.int32),
    "view size error": lambda m: m.arange(3, dtype=m.float32).view(m.float64),
    "view stride error": lambda m: m.arange(6, dtype=m.float32).reshape(2, 3).t().view(m.float64),
    "view 0-d error": lambda m: m.tensor(1.0).view(m.float64),
    "view double->float": lambda m: m.arange(3, dtype=m.float64).view(m.float32),
    "cat 0-d": lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]),
    "index 5": lambda m: m.zeros(3)[5],
    "gather int32": lambda m: m.arange(6.0).reshape(2, 3).gather(1, m.tensor([[2, 0], [1, 1]], dtype=m.int32)),
    "gather bounds": lambda m: m.zeros(3).gather(0, m.tensor([5])),
    "sum axis": lambda m: m.arange(6.0).reshape(2, 3).sum(axis=1),
    "max axis": lambda m: m.arange(6.0).reshape(2, 3).max(axis=0).values,
    "any axis": lambda m: (m.arange(6.0).reshape(2, 3) > 2).any(axis=1),
    "isclose": lambda m: m.tensor([1.0, 2.0, float("nan")]).isclose(m.tensor([1.0, 2.1, float("nan")]), equal_nan=True),
    "isclose dtype": lambda m: m.tensor([1]).isclose(m.tensor([1.0])),
    "isclose rtol": lambda m: m.tensor([1.0]).isclose(m.tensor([1.0]), rtol=-1),
    "einsum": lambda m: m.einsum("bij,bjk->bik", m.arange(6.0).reshape(1, 2, 3), m.arange(24.0).reshape(2, 3, 4)),
    "einsum trace": lambda m: m.einsum("ii", m.arange(9.0).reshape(3, 3)),
    "einsum implicit": lambda m: m.einsum("Ab,bc", m.arange(6.0).reshape(2, 3), m.arange(6.0).reshape(3, 2)),
    "einsum error": lambda m: m.einsum("ij,jk->ik", m.ones(2, 3), m.ones(4, 4)),
    "cummax": lambda m: m.tensor([1.0, 3.0, 3.0, 2.0, 5.0, 5.0]).cummax(0),
    "cummin int": lambda m: m.tensor([3, 1, 1, 2]).cummin(0),
    "cummax nan": lambda m: m.tensor([1.0, float("nan"), 3.0]).cummax(0),
    "cumprod int": lambda m: m.tensor([1, 2, 3], dtype=m.int32).cumprod(0),
    "exp2 int": lambda m: m.tensor([1, 2, 3]).exp2(),
    "copysign": lambda m: m.tensor([1, -2, 3]).copysign(m.tensor([-1.0, 1.0, -0.0])),
    "div trunc": lambda m: m.tensor([7, -7]).div(2, rounding_mode="trunc"),
    "div floor": lambda m: m.div(m.tensor([7.0, -7.0]), 2, rounding_mode="floor"),
    "div mode error": lambda m: m.tensor([7]).div(2, rounding_mode="nope"),
    "device nope": lambda m: m.device("nope"),
    "device str": lambda m: str(m.device("cpu", 0)),
    "device repr": lambda m: repr(m.device("cuda:1")),
    "to cpu float64": lambda m: m.ones(2).to("cpu", m.float64),
    **{f"scatter_reduce {r} {inc}": (lambda m, r=r, inc=inc: m.tensor([1.0, 2.0, 3.0, 4.0]).scatter_reduce(
        0, m.tensor([0, 1, 0, 1, 2, 1]), m.tensor([1.0, 0.0, 3.0, 4.0, 5.0, 6.0]), r, include_self=inc))
       for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)},
}


def plain(result):
    """A result as plain Python: values (NaN as a string) and dtype name, or a string, or a tuple of them."""
    if isinstance(result, tuple):
        return tuple(plain(r) for r in result)
    if isinstance(result, str):
        return result
    def value(v):
        if isinstance(v, list):
            return [value(x) for x in v]
        return ("nan" if math.isnan(v) else round(v, 6)) if isinstance(v, float) else v
    return str(result.dtype).rsplit(".", 1)[-1], value(result.tolist())


def outcome(fn, module):
    try:
        return plain(fn(module))
    except Exception as error:  # noqa: BLE001 - the class and message are compared
        return type(error).__name__, str(error)


@pytest.mark.parametrize("case", ORACLE)
def test_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    assert outcome(ORACLE[case], tt) == outcome(ORACLE[case], torch)


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    def grads(m):
        x = m.tensor([[1.0, 0.0, 3.0], [0.0, 0.0, 2.0]], dtype=m.float64, requires_grad=True)
        s = m.tensor([2.0, 0.0, 5.0, 5.0], dtype=m.float64, requires_grad=True)
        index = m.tensor([0, 2, 2, 1])
        y = (x.cumprod(1).sum() + x.cummax(0).values.sum() * 2 + x.cummin(1).values.sum()
             + m.einsum("ij,kj->ik", x, x).sum() + x.reshape(-1).scatter_reduce(0, index, s, "prod").sum()
             + x.reshape(-1).scatter_reduce(0, index, s, "amax", include_self=False).sum()
             + x.reshape(-1).scatter_reduce(0, index, s, "mean").sum() + x.exp2().sum() + x.copysign(-1.0).sum())
        y.backward()
        return x.grad.tolist(), s.grad.tolist()
    assert np.allclose(grads(tt)[0], grads(torch)[0]) and np.allclose(grads(tt)[1], grads(torch)[1])
