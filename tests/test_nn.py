"""Module 04's package (tinytorch.nn): layers and losses against numpy, gradcheck, and torch if present."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import Tensor, gradcheck
from tinytorch.tensor_base import Generator

settings.register_profile("tinytorch", max_examples=30, deadline=None)
settings.load_profile("tinytorch")

lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


def t64(array, grad=True):
    return Tensor.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def log_softmax_np(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@given(lead_shapes, st.integers(1, 4), st.integers(1, 4), st.booleans(), st.integers(0, 99))
def test_linear_matches_numpy_and_gradcheck(lead, fan_in, fan_out, bias, seed):
    rng = np.random.default_rng(seed)
    x, w, b = t64(rng.standard_normal(lead + (fan_in,))), t64(rng.standard_normal((fan_out, fan_in))), \
        t64(rng.standard_normal(fan_out)) if bias else None
    y = F.linear(x, w, b)
    expected = x.detach().numpy() @ w.detach().numpy().T + (b.detach().numpy() if bias else 0)
    assert y.shape == lead + (fan_out,) and np.allclose(y.detach().numpy(), expected)
    assert gradcheck(lambda *a: F.linear(*a) if bias else F.linear(*a), (x, w, b) if bias else (x, w))


@given(lead_shapes, st.integers(1, 5), st.integers(0, 99))
def test_softmax_family_and_activations_gradcheck(lead, n, seed):
    x = np.random.default_rng(seed).standard_normal(lead + (n,)) * 3
    assert np.allclose(F.log_softmax(Tensor.tensor(x)).numpy(), log_softmax_np(x))
    assert np.allclose(F.softmax(Tensor.tensor(x)).numpy(), np.exp(log_softmax_np(x)))
    for fn in [F.relu, F.tanh, F.sigmoid, F.silu, F.gelu, lambda t: F.gelu(t, "tanh"),
               lambda t: F.softmax(t, 0), F.log_softmax]:
        xs = t64(x + 0.01)  # away from ReLU's kink at 0
        assert gradcheck(fn, (xs,))


@pytest.mark.parametrize("name", ["relu", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activations_of_a_0d_tensor(name, dtype):
    """A 0-d input works as a 1-element one does: numpy's ufuncs return scalars for 0-d arrays,
    so code that writes with `out=` fails on them."""
    fn = (lambda t: F.gelu(t, "tanh")) if name == "gelu_tanh" else getattr(F, name)
    x = Tensor.tensor(np.array(0.7, dtype=dtype), requires_grad=True)
    y = fn(x)
    y.backward()
    one = Tensor.tensor(np.array([0.7], dtype=dtype), requires_grad=True)
    y_one = fn(one)
    y_one.backward(Tensor.tensor(np.ones(1, dtype=dtype)))
    assert y.shape == () and x.grad.shape == ()
    assert np.allclose(y.item(), y_one.item()) and np.allclose(x.grad.item(), one.grad.item())
    if dtype == "float64":
        assert gradcheck(fn, (t64(np.array(0.7)),))


def test_activations_match_closed_forms():
    x = np.linspace(-30, 30, 61)
    sig = 1 / (1 + np.exp(-x))
    assert np.allclose(F.sigmoid(Tensor.tensor(x)).numpy(), sig)
    assert np.allclose(F.silu(Tensor.tensor(x)).numpy(), x * sig)
    assert np.allclose(F.tanh(Tensor.tensor(x)).numpy(), np.tanh(x))
    assert np.allclose(F.relu(Tensor.tensor(x)).numpy(), np.maximum(x, 0))
    assert np.allclose(F.gelu(Tensor.tensor(x)).numpy(), x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))
    assert np.all(np.isfinite(F.sigmoid(Tensor.tensor([-1e4, 1e4])).numpy()))


@given(st.integers(1, 6), st.integers(2, 5), st.sampled_from(["mean", "sum", "none"]),
       st.sampled_from([0.0, 0.1]), st.integers(0, 99))
def test_cross_entropy_matches_numpy_and_gradcheck(n, c, reduction, smoothing, seed):
    rng = np.random.default_rng(seed)
    logits, targets = rng.standard_normal((n, c)) * 2, rng.integers(0, c, n)
    targets[rng.random(n) < 0.3] = -100
    logp = log_softmax_np(logits)
    keep = targets != -100
    rows = -(1 - smoothing) * logp[np.arange(n), np.where(keep, targets, 0)] - smoothing * logp.mean(axis=1)
    rows = np.where(keep, rows, 0)
    expected = {"none": rows, "sum": rows.sum(), "mean": rows.sum() / keep.sum() if keep.any() else np.nan}
    got = F.cross_entropy(Tensor.tensor(logits), targets, label_smoothing=smoothing, reduction=reduction)
    assert np.allclose(got.numpy(), expected[reduction], equal_nan=True)
    if keep.any():
        assert gradcheck(lambda t: F.cross_entropy(t, targets, label_smoothing=smoothing, reduction=reduction),
                         (t64(logits),))


def test_losses_are_stable_for_huge_logits():
    x = Tensor.tensor([[1e4, -1e4, 0.0]], dtype="float32", requires_grad=True)
    loss = F.cross_entropy(x, np.array([2]))
    loss.backward()
    assert np.isclose(loss.item(), 1e4) and np.all(np.isfinite(x.grad.numpy()))
    z = Tensor.tensor([1e4, -1e4, 0.0], dtype="float32", requires_grad=True)
    bce = F.binary_cross_entropy_with_logits(z, np.array([0.0, 1.0, 1.0], dtype=np.float32), reduction="none")
    assert np.allclose(bce.detach().numpy(), [1e4, 1e4, math.log(2)])
    bce.backward(np.ones(3, dtype=np.float32))
    assert np.allclose(z.grad.numpy(), [1.0, -1.0, -0.5])


@given(st.integers(1, 5), st.sampled_from(["mean", "sum", "none"]), st.integers(0, 99))
def test_mse_and_bce_gradcheck(n, reduction, seed):
    rng = np.random.default_rng(seed)
    a, b = t64(rng.standard_normal(n)), t64(rng.standard_normal(n))
    assert np.allclose(F.mse_loss(a, b, reduction="none").detach().numpy(), (a.detach().numpy() - b.detach().numpy()) ** 2)
    assert gradcheck(lambda u, v: F.mse_loss(u, v, reduction=reduction), (a, b))
    y = t64(rng.random(n))
    assert gradcheck(lambda u, v: F.binary_cross_entropy_with_logits(u, v, reduction=reduction), (a, y))


@given(lead_shapes, st.integers(1, 4), st.integers(1, 2), st.integers(0, 99))
def test_layer_norm_matches_numpy_and_gradcheck(lead, n, k, seed):
    rng = np.random.default_rng(seed)
    shape = (2,) * (k - 1) + (n,)
    x = rng.standard_normal(lead + shape) * 2 + 1
    axes = tuple(range(x.ndim - k, x.ndim))
    w, b = rng.standard_normal(shape), rng.standard_normal(shape)
    expected = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5) * w + b
    got = F.layer_norm(Tensor.tensor(x), shape, Tensor.tensor(w), Tensor.tensor(b))
    assert np.allclose(got.numpy(), expected)
    if n * 2 ** (k - 1) > 1:
        assert gradcheck(lambda *a: F.layer_norm(a[0], shape, a[1], a[2]), (t64(x), t64(w), t64(b)), atol=1e-4)


@given(st.lists(st.integers(0, 4), max_size=4), st.integers(0, 4), st.sampled_from(["float32", "float64", "int64"]),
       st.integers(0, 99))
@settings(max_examples=60, deadline=None)
def test_blas_mean_and_sum_are_numpys_mean_and_sum(shape, k, dtype, seed):
    """Module 04's given helpers (Linear's bias gradient, LayerNorm): the same numbers as numpy's, on any axes."""
    from tinytorch.nn import _blas_mean, _blas_sum
    a = (np.random.default_rng(seed).standard_normal(shape) * 10).astype(dtype)
    k = min(k, a.ndim)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    last = tuple(range(a.ndim - k, a.ndim))
    for axes in {last, tuple(axis - a.ndim for axis in last), tuple(range(k)), tuple(range(0, a.ndim, 2))}:
        with warnings.catch_warnings():  # the mean over no elements is nan, with a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            want_mean, got_mean = a.mean(axis=axes, keepdims=True), _blas_mean(a, axes)
        assert got_mean.shape == want_mean.shape and got_mean.dtype == want_mean.dtype
        assert np.allclose(got_mean, want_mean, equal_nan=True, **tol)
        for keepdims in (False, True):
            want_sum, got_sum = a.sum(axis=axes, keepdims=keepdims), _blas_sum(a, axes, keepdims)
            assert np.shape(got_sum) == want_sum.shape and got_sum.dtype == want_sum.dtype
            assert np.allclose(got_sum, want_sum, **tol)


def test_embedding_forward_and_repeated_index_gradient():
    emb = nn.Embedding(5, 3)
    idx = np.array([[0, 2], [2, 4]])
    out = emb(idx)
    assert np.array_equal(out.detach().numpy(), emb.weight.detach().numpy()[idx])
    out.backward(np.ones((2, 2, 3), dtype=np.float32))
    assert emb.weight.grad.numpy()[:, 0].tolist() == [1, 0, 2, 0, 1]
    w = t64(np.random.default_rng(0).standard_normal((4, 2)))
    assert gradcheck(lambda t: F.embedding(np.array([1, 1, 3]), t), (w,))


@given(st.lists(st.integers(0, 5), max_size=12), st.integers(1, 3), st.integers(0, 99))
@settings(max_examples=40, deadline=None)
def test_embedding_gradient_sums_every_use_of_a_row(indices, width, seed):
    """Against np.add.at: repeated rows, no indices at all (negative ones raise, as in PyTorch)."""
    index = np.array(indices, dtype=np.int64)
    if index.size % 2 == 0:
        index = index.reshape(-1, 2)  # a 2-D batch of indices too
    rng = np.random.default_rng(seed)
    weight = Tensor.tensor(rng.standard_normal((6, width)), requires_grad=True)
    g = rng.standard_normal(index.shape + (width,))
    F.embedding(index, weight).backward(g)
    expected = np.zeros((6, width))
    np.add.at(expected, index.reshape(-1), g.reshape(-1, width))
    assert np.allclose(weight.grad.numpy(), expected)


def test_default_initialisation_follows_pytorch():
    layer = nn.Linear(256, 1000)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert np.abs(w).max() <= 1 / 16 and np.abs(w).max() > 0.99 / 16 and abs(w.std() - 1 / 16 / math.sqrt(3)) < 1e-3
    assert np.abs(b).max() <= 1 / 16
    table = nn.Embedding(1000, 100).weight.detach().numpy()
    assert abs(table.std() - 1) < 0.02 and abs(table.mean()) < 0.02


def test_module_tree_state_dict_repr_and_modes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.5))
            self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})
            self.extra = nn.ModuleList([nn.LayerNorm(8)])

        def forward(self, x):
            h = self.extra[0](self.body(x))
            return self.heads["a"](h), self.heads["b"](h)

    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["body.0.weight", "body.0.bias", "heads.a.weight", "heads.a.bias", "heads.b.weight",
                     "heads.b.bias", "extra.0.weight", "extra.0.bias"]
    a, b = net(Tensor.randn(3, 4))
    (F.cross_entropy(a, np.array([0, 1, 0])) + F.cross_entropy(b, np.array([2, 1, 0]))).backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    other = Net()
    other.load_state_dict(net.state_dict())
    net.eval(), other.eval()
    x = Tensor.randn(2, 4)
    assert np.allclose(net(x)[0].detach().numpy(), other(x)[0].detach().numpy())
    assert repr(net).startswith("Net(\n  (body): Sequential(\n    (0): Linear(in_features=4, out_features=8, bias=True)")
    assert "(a): Linear(in_features=8, out_features=2, bias=True)" in repr(net)
    assert isinstance(2 * net.body[0].weight, Tensor) and not isinstance(2 * net.body[0].weight, nn.Parameter)
    assert not isinstance(net.body[0].weight.detach(), nn.Parameter)


def test_dropout_is_seedable_and_off_in_eval():
    x = Tensor.ones(100)
    a = nn.Dropout(0.3, generator=Generator(1))(x).numpy()
    b = nn.Dropout(0.3, generator=Generator(1))(x).numpy()
    assert np.array_equal(a, b)
    assert nn.Dropout(0.3).eval()(x) is x


def test_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6))
    targets = np.array([1, -100, 3, 0])
    for kwargs in [{}, {"label_smoothing": 0.2}, {"reduction": "sum"}]:
        ours = t64(x)
        F.cross_entropy(ours, targets, **kwargs).backward()
        theirs = torch.tensor(x, requires_grad=True)
        torch.nn.functional.cross_entropy(theirs, torch.tensor(targets), **kwargs).backward()
        assert np.allclose(ours.grad.numpy(), theirs.grad.numpy())
    for ours_fn, torch_fn in [(F.gelu, torch.nn.functional.gelu),
                              (lambda t: F.gelu(t, "tanh"), lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
                              (F.silu, torch.nn.functional.silu),
                              (lambda t: F.layer_norm(t, 6), lambda t: torch.nn.functional.layer_norm(t, (6,)))]:
        ours, theirs = t64(x), torch.tensor(x, requires_grad=True)
        ours_out, theirs_out = ours_fn(ours), torch_fn(theirs)
        assert np.allclose(ours_out.detach().numpy(), theirs_out.detach().numpy())
        ours_out.backward(np.cos(x))
        theirs_out.backward(torch.tensor(np.cos(x)))
        assert np.allclose(ours.grad.numpy(), theirs.grad.numpy())


# --- PyTorch's behaviour and errors (issue 16) --------------------------------------------------

def error(fn, *args, **kwargs):
    """(class, message) of what fn raises."""
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("index", [-1, 3, 7])
def test_embedding_rows_out_of_range_raise_index_error(index):
    kind, message = error(nn.Embedding(3, 2), np.array([0, index]))
    assert kind is IndexError and message.startswith("index out of range in self") and str(index) in message
    kind, message = error(nn.Embedding(3, 2), np.array([0.0, 1.0]))
    assert kind is RuntimeError and "Long" in message


@pytest.mark.parametrize("target", [-1, 3, 99])
def test_cross_entropy_targets_out_of_bounds_raise_index_error(target):
    logits = Tensor.randn(2, 3)
    kind, message = error(F.cross_entropy, logits, np.array([0, target]))
    assert kind is IndexError and message.startswith(f"Target {target} is out of bounds.")
    kind, message = error(F.nll_loss, F.log_softmax(logits, 1), np.array([0, target]))
    assert kind is IndexError and message.startswith(f"Target {target} is out of bounds.")
    assert np.isfinite(F.cross_entropy(logits, np.array([0, target]), ignore_index=target).item())


@given(st.integers(1, 5), st.integers(2, 5), st.sampled_from(["mean", "sum", "none"]), st.sampled_from([0.0, 0.2]),
       st.integers(0, 99))
def test_cross_entropy_with_class_probabilities(n, c, reduction, smoothing, seed):
    rng = np.random.default_rng(seed)
    x, p = rng.standard_normal((n, c)), rng.dirichlet(np.ones(c), size=n)
    q = p * (1 - smoothing) + smoothing / c
    rows = -(q * log_softmax_np(x, 1)).sum(1)
    want = rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.mean()
    got = F.cross_entropy(t64(x), p, reduction=reduction, label_smoothing=smoothing)
    assert np.allclose(got.detach().numpy(), want)
    assert gradcheck(lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=smoothing),
                     (t64(x), t64(p)))


def test_cross_entropy_float_targets_of_another_shape_raise():
    kind, message = error(F.cross_entropy, Tensor.randn(2, 3), np.array([0.0, 1.0]))
    assert kind is RuntimeError and "Long" in message and "(2,)" in message and "(2, 3)" in message


def test_linear_dtype_and_shape_errors_name_the_operands():
    kind, message = error(F.linear, Tensor.randn(2, 3).to("float64"), Tensor.randn(4, 3))
    assert kind is RuntimeError and message.startswith("mat1 and mat2 must have the same dtype")
    assert "Double and Float" in message
    kind, message = error(nn.Linear(3, 4), Tensor.randn(2, 5))
    assert kind is RuntimeError and message.startswith("mat1 and mat2 shapes cannot be multiplied (2x5 and 3x4)")
    kind, message = error(nn.Linear(3, 4), Tensor.randn(2, 7, 5))
    assert kind is RuntimeError and "(14x5 and 3x4)" in message


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_dim_out_of_range_raises_index_error(fn):
    kind, message = error(fn, Tensor.randn(2, 3), dim=3)
    assert kind is IndexError
    assert message == "Dimension out of range (expected to be in range of [-2, 1], but got 3)"
    assert np.allclose(fn(t64(np.eye(2)), dim=-2).detach().numpy(), fn(t64(np.eye(2)), dim=0).detach().numpy())


# --- given layers and functions: CrossEntropyLoss, MSELoss, Flatten, nll_loss, one_hot, pad, buffers ----

@given(st.integers(1, 5), st.integers(2, 5), st.sampled_from(["mean", "sum", "none"]), st.integers(0, 99))
def test_nll_loss_matches_numpy_and_gradcheck(n, c, reduction, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c))
    y = rng.integers(0, c, n)
    y[0] = -100  # ignored
    rows = np.where(y != -100, -x[np.arange(n), np.maximum(y, 0)], 0)
    want = rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.sum() / max((y != -100).sum(), 1)
    got = F.nll_loss(t64(x), y, reduction=reduction)
    if reduction == "mean" and n == 1:
        assert np.isnan(got.item())  # every row ignored: 0 / 0, as PyTorch
    else:
        assert np.allclose(got.detach().numpy(), want)
        assert gradcheck(lambda a: F.nll_loss(a, y, reduction=reduction), (t64(x),))
    z = t64(x)
    assert np.allclose(F.nll_loss(F.log_softmax(z, 1), y).detach().numpy(), F.cross_entropy(z, y).detach().numpy(), equal_nan=True)


def test_loss_modules_and_flatten():
    rng = np.random.default_rng(0)
    x, y = t64(rng.standard_normal((4, 3))), np.array([0, 2, 1, 1])
    assert np.allclose(nn.CrossEntropyLoss(label_smoothing=0.1)(x, y).detach().numpy(),
                       F.cross_entropy(x, y, label_smoothing=0.1).detach().numpy())
    assert nn.CrossEntropyLoss(reduction="none")(x, y).shape == (4,)
    t = rng.standard_normal((4, 3))
    assert np.allclose(nn.MSELoss()(x, t).detach().numpy(), ((x.detach().numpy() - t) ** 2).mean())
    assert np.allclose(nn.MSELoss(reduction="sum")(x, t).detach().numpy(), ((x.detach().numpy() - t) ** 2).sum())
    z = t64(rng.standard_normal((2, 3, 4, 5)))
    assert nn.Flatten()(z).shape == (2, 60) and nn.Flatten(0, 1)(z).shape == (6, 4, 5)
    assert nn.Flatten(-2)(z).shape == (2, 3, 20) and np.array_equal(nn.Flatten()(z).detach().numpy(), z.detach().numpy().reshape(2, 60))
    assert gradcheck(lambda a: nn.Flatten(1, 2)(a), (z,))
    assert "start_dim=1, end_dim=-1" in repr(nn.Flatten())


@given(st.lists(st.integers(0, 4), min_size=0, max_size=6), st.sampled_from([-1, 5, 7]))
def test_one_hot(indices, num_classes):
    index = np.array(indices, dtype=np.int64)
    got = F.one_hot(Tensor.tensor(index) if index.size else index, num_classes)
    n = (int(index.max()) + 1 if index.size else 0) if num_classes == -1 else num_classes
    assert got.dtype.name == "int64" and np.array_equal(got.numpy(), np.eye(n, dtype=np.int64)[index])
    assert error(F.one_hot, np.array([0, 5]), 3)[0] is RuntimeError
    assert error(F.one_hot, np.array([0.0, 1.0]))[0] is RuntimeError


@given(st.lists(st.integers(1, 3), min_size=1, max_size=3),
       st.lists(st.integers(-1, 2), min_size=2, max_size=4).filter(lambda p: len(p) % 2 == 0),
       st.floats(-2, 2), st.integers(0, 99))
def test_pad_matches_numpy_and_gradcheck(shape, pads, value, seed):
    if len(pads) // 2 > len(shape):
        assert error(F.pad, Tensor.zeros(*shape), pads)[0] is RuntimeError
        return
    shape = [s + 2 for s in shape]  # room to crop with negative pads
    x = t64(np.random.default_rng(seed).standard_normal(shape))
    a = x.detach().numpy()
    for d, (lo, hi) in enumerate(zip(pads[::2], pads[1::2])):  # last dimension first
        axis = a.ndim - 1 - d
        a = np.take(a, range(max(-lo, 0), a.shape[axis] - max(-hi, 0)), axis=axis)
        widths = [(0, 0)] * a.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        a = np.pad(a, widths, constant_values=value)
    assert np.allclose(F.pad(x, pads, value=value).detach().numpy(), a)
    assert gradcheck(lambda t: F.pad(t, pads, value=value), (x,))


def test_pad_errors():
    assert error(F.pad, Tensor.zeros(2, 3), (1, 2, 3)) == (RuntimeError, "Padding length must be divisible by 2, got 3")
    assert error(F.pad, Tensor.zeros(2, 3), (1, 1, 1, 1, 1, 1))[0] is RuntimeError
    assert error(F.pad, Tensor.zeros(3), (1, 1), mode="reflect")[0] is NotImplementedError  # as PyTorch: 2-D or 3-D


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.register_buffer("mask", Tensor.ones(2))
        self.register_buffer("scratch", Tensor.zeros(3), persistent=False)

    def forward(self, x):
        return self.linear(x) * self.mask


def test_buffers_are_kept_saved_and_loaded_but_not_parameters():
    model = nn.Sequential(WithBuffers())
    assert [name for name, _ in model.named_parameters()] == ["0.linear.weight", "0.linear.bias"]
    assert [name for name, _ in model.named_buffers()] == ["0.mask", "0.scratch"]
    state = model.state_dict()
    assert list(state) == ["0.linear.weight", "0.linear.bias", "0.mask"]  # not persistent: not saved
    assert not state["0.mask"].requires_grad
    other = nn.Sequential(WithBuffers())
    state["0.mask"] = Tensor.tensor([2.0, 3.0])
    assert other.load_state_dict(state) == ((), ()) or tuple(map(list, other.load_state_dict(state))) == ([], [])
    assert other[0].mask.tolist() == [2.0, 3.0]
    assert np.array_equal(other[0].linear.weight.detach().numpy(), model[0].linear.weight.detach().numpy())
    model[0].mask = Tensor.tensor([5.0, 6.0])  # reassigning a buffer keeps it a buffer
    assert model.state_dict()["0.mask"].tolist() == [5.0, 6.0]
    with pytest.raises(TypeError):
        model[0].register_buffer("bad", [1, 2])


def test_apply_visits_children_first_then_the_module():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    seen = []
    assert model.apply(lambda m: seen.append(type(m).__name__)) is model
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]

    def zero(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
    model.apply(zero)
    assert all(not p.detach().numpy().any() for name, p in model.named_parameters() if name.endswith("weight"))


def test_given_functions_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    rng = np.random.default_rng(1)
    x, p = rng.standard_normal((4, 5)), rng.dirichlet(np.ones(5), size=4)
    y = np.array([0, 4, -100, 2])
    for ours, theirs in [
        (F.cross_entropy(t64(x), p, label_smoothing=0.1), tF.cross_entropy(torch.tensor(x), torch.tensor(p), label_smoothing=0.1)),
        (F.nll_loss(t64(x), y), tF.nll_loss(torch.tensor(x), torch.tensor(y))),
        (F.nll_loss(t64(x), y, reduction="none"), tF.nll_loss(torch.tensor(x), torch.tensor(y), reduction="none")),
        (F.one_hot(Tensor.tensor([1, 3, 0])), tF.one_hot(torch.tensor([1, 3, 0]))),
        (F.one_hot(Tensor.tensor([1, 3, 0]), 6), tF.one_hot(torch.tensor([1, 3, 0]), 6)),
        (F.pad(t64(x), (1, -2, 2, 0), value=0.5), tF.pad(torch.tensor(x), (1, -2, 2, 0), value=0.5)),
        (nn.Flatten(0)(t64(x)), torch.nn.Flatten(0)(torch.tensor(x))),
    ]:
        assert np.allclose(ours.detach().numpy(), theirs.detach().numpy())
    a, b = t64(x), torch.tensor(x, requires_grad=True)
    F.pad(a, (2, 1, -1, 1)).sum().backward()
    tF.pad(b, (2, 1, -1, 1)).sum().backward()
    assert np.allclose(a.grad.numpy(), b.grad.numpy())
    for ours, theirs in [(lambda: nn.Embedding(3, 2)(Tensor.tensor([3])), lambda: torch.nn.Embedding(3, 2)(torch.tensor([3]))),
                         (lambda: F.cross_entropy(Tensor.randn(2, 3), Tensor.tensor([0, -1])),
                          lambda: tF.cross_entropy(torch.randn(2, 3), torch.tensor([0, -1]))),
                         (lambda: F.softmax(Tensor.randn(2, 3), 3), lambda: tF.softmax(torch.randn(2, 3), 3)),
                         (lambda: nn.Linear(3, 4)(Tensor.randn(2, 5)), lambda: torch.nn.Linear(3, 4)(torch.randn(2, 5)))]:
        with pytest.raises(Exception) as want:
            theirs()
        kind, message = error(ours)
        assert kind is type(want.value) and message.startswith(str(want.value).split("\n")[0])


def test_float32_erf_is_accurate_on_a_dense_grid():
    """The given float32 erf (tanh of a polynomial) against math.erf, everywhere that matters."""
    from tinytorch.nn import _erf
    far = [5.0, -5.0, 50.0, -50.0, 1e19, -1e19, 1e20, -1e20, 3e38, -3e38, np.inf, -np.inf]  # x² overflows past 1.8e19
    x = np.concatenate([np.linspace(-7, 7, 140_001), [0.0, -0.0, 1e-30, -1e-30], far])
    x32 = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        got = _erf(x32)
    want = np.array([math.erf(v) for v in x32.astype(np.float64)])
    assert got.dtype == np.float32 and got.shape == x32.shape
    assert np.max(np.abs(got - want)) < 2.5e-7  # two float32 roundings at 1; float32's eps is 1.2e-7
    small = np.abs(x32) < 1e-3  # near 0 the error is relative: erf(x) ~ 2x/sqrt(pi)
    assert np.allclose(got[small], want[small], rtol=1e-6, atol=0)
    assert np.array_equal(got[-len(far):], np.float32([1, -1] * (len(far) // 2))) and np.all(np.abs(got) <= 1)
    assert np.all(np.diff(got[:140_001]) >= 0)  # increasing, as erf is
    assert np.isnan(_erf(np.float32([np.nan]))).all()
    x64 = np.linspace(-5, 5, 1001)  # other dtypes keep the exact function
    assert np.allclose(_erf(x64), [math.erf(v) for v in x64], rtol=0, atol=1e-14)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_exact_gelu_float32_value_and_gradient(n, seed):
    """Exact GELU in float32 against the float64 formula, and its gradient against finite differences."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    x = tinytorch.tensor(a, requires_grad=True)
    y = F.gelu(x)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in a.astype(np.float64)])
    assert y.detach().numpy().dtype == np.float32
    assert np.allclose(y.detach().numpy(), exact, rtol=1e-6, atol=1e-6)
    y.sum().backward()
    h = 1e-3  # central differences of the float32 function, in float64 arithmetic on its outputs
    up = F.gelu(tinytorch.tensor((a.astype(np.float64) + h).astype(np.float32))).numpy().astype(np.float64)
    down = F.gelu(tinytorch.tensor((a.astype(np.float64) - h).astype(np.float32))).numpy().astype(np.float64)
    step = (a.astype(np.float64) + h).astype(np.float32).astype(np.float64) - \
        (a.astype(np.float64) - h).astype(np.float32).astype(np.float64)
    assert np.allclose(x.grad.numpy(), (up - down) / step, rtol=1e-3, atol=2e-3)


def test_exact_gelu_float32_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((64, 257)).astype(np.float32) * 4
    g = np.random.default_rng(1).standard_normal(a.shape).astype(np.float32)
    x, tx = tinytorch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    F.gelu(x).backward(tinytorch.tensor(g))
    want = torch.nn.functional.gelu(tx)
    want.backward(torch.tensor(g))
    assert np.allclose(F.gelu(tinytorch.tensor(a)).numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert np.allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
