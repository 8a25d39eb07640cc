"""Module 04's package (tinytorch.nn): layers and losses against numpy, gradcheck, and torch if present."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

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
    expected = x.numpy() @ w.numpy().T + (b.numpy() if bias else 0)
    assert y.shape == lead + (fan_out,) and np.allclose(y.numpy(), expected)
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
    assert np.allclose(bce.numpy(), [1e4, 1e4, math.log(2)])
    bce.backward(np.ones(3, dtype=np.float32))
    assert np.allclose(z.grad.numpy(), [1.0, -1.0, -0.5])


@given(st.integers(1, 5), st.sampled_from(["mean", "sum", "none"]), st.integers(0, 99))
def test_mse_and_bce_gradcheck(n, reduction, seed):
    rng = np.random.default_rng(seed)
    a, b = t64(rng.standard_normal(n)), t64(rng.standard_normal(n))
    assert np.allclose(F.mse_loss(a, b, reduction="none").numpy(), (a.numpy() - b.numpy()) ** 2)
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


def test_embedding_forward_and_repeated_index_gradient():
    emb = nn.Embedding(5, 3)
    idx = np.array([[0, 2], [2, 4]])
    out = emb(idx)
    assert np.array_equal(out.numpy(), emb.weight.numpy()[idx])
    out.backward(np.ones((2, 2, 3), dtype=np.float32))
    assert emb.weight.grad.numpy()[:, 0].tolist() == [1, 0, 2, 0, 1]
    w = t64(np.random.default_rng(0).standard_normal((4, 2)))
    assert gradcheck(lambda t: F.embedding(np.array([1, 1, 3]), t), (w,))


@given(st.lists(st.integers(-6, 5), max_size=12), st.integers(1, 3), st.integers(0, 99))
@settings(max_examples=40, deadline=None)
def test_embedding_gradient_sums_every_use_of_a_row(indices, width, seed):
    """Against np.add.at: repeated rows, negative indices (row -1 is the last row), no indices at all."""
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
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert np.abs(w).max() <= 1 / 16 and np.abs(w).max() > 0.99 / 16 and abs(w.std() - 1 / 16 / math.sqrt(3)) < 1e-3
    assert np.abs(b).max() <= 1 / 16
    table = nn.Embedding(1000, 100).weight.numpy()
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
    assert np.allclose(net(x)[0].numpy(), other(x)[0].numpy())
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
        assert np.allclose(ours_out.numpy(), theirs_out.detach().numpy())
        ours_out.backward(np.cos(x))
        theirs_out.backward(torch.tensor(np.cos(x)))
        assert np.allclose(ours.grad.numpy(), theirs.grad.numpy())
