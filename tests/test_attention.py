"""Library tests of tinytorch.attention against numpy (hypothesis shapes) and, where present, PyTorch."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.autograd import Tensor, gradcheck
from tinytorch.attention import MultiHeadAttention, scaled_dot_product_attention, sinusoidal_encoding


def reference(q, k, v, bias=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None:
        s = s + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


shapes = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 5),
                   st.integers(1, 6), st.integers(1, 4))


@settings(max_examples=30, deadline=None)
@given(shapes, st.sampled_from(["none", "causal", "bool", "float"]), st.integers(0, 2**31 - 1))
def test_attention_matches_numpy(shape, mask_kind, seed):
    B, H, L, S, E, Ev = shape
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((B, H, L, E)), rng.standard_normal((B, H, S, E)), rng.standard_normal((B, H, S, Ev))
    kwargs, bias = {}, None
    if mask_kind == "causal":
        kwargs["is_causal"], bias = True, np.where(np.tril(np.ones((L, S), bool)), 0.0, -np.inf)
    elif mask_kind == "bool":
        m = rng.random((H, L, S)) > 0.5
        m[..., 0] = True
        kwargs["attn_mask"], bias = m, np.where(m, 0.0, -np.inf)
    elif mask_kind == "float":
        bias = kwargs["attn_mask"] = rng.standard_normal((B, 1, L, S))
    if mask_kind == "causal" and L > S:
        bias[:, 0] = 0.0  # fully masked rows would be NaN, as in PyTorch: keep one key for them
        kwargs = {"attn_mask": bias}
    got = scaled_dot_product_attention(*(Tensor.tensor(a) for a in (q, k, v)), **kwargs).numpy()
    np.testing.assert_allclose(got, reference(q, k, v, bias), atol=1e-9)


@settings(max_examples=10, deadline=None)
@given(shapes, st.booleans(), st.integers(0, 2**31 - 1))
def test_attention_gradients(shape, causal, seed):
    B, H, L, S, E, Ev = shape
    S = L if causal else S
    rng = np.random.default_rng(seed)
    inputs = [Tensor.tensor(rng.standard_normal(s), requires_grad=True)
              for s in [(B, H, L, E), (B, 1, S, E), (1, H, S, Ev)]]
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=causal), inputs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=4), st.sampled_from([1.0, 30.0, 1000.0]),
       st.sampled_from(["float32", "float64"]), st.booleans(), st.integers(0, 2**31 - 1))
def test_attentions_fast_softmax_is_the_exact_one(shape, spread, dtype, masked, seed):
    """The given `_softmax_last` (module 06) shifts whole blocks by their maximum: rows far below their
    block's best (spread 1000: the fallback to the row's own maximum), masked keys, and every key of a
    row masked (NaN, as the exact softmax and PyTorch give) must come out as the row-by-row softmax."""
    from tinytorch.attention import _softmax_last
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal(shape) * spread).astype(dtype)
    if masked and s.size:
        s[rng.random(shape) < 0.3] = -np.inf
    before = s.copy()
    with np.errstate(invalid="ignore"):  # a row all -inf: -inf - (-inf)
        want = np.exp(s - s.max(axis=-1, keepdims=True, initial=-np.inf))
        want /= want.sum(axis=-1, keepdims=True)
    got = _softmax_last(s)
    assert got.dtype == s.dtype and got.shape == s.shape and np.array_equal(s, before, equal_nan=True)
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)  # NaN where want is NaN


def test_causal_attention_ignores_the_future():
    rng = np.random.default_rng(0)
    m = MultiHeadAttention(16, 4, causal=True)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    base = m(Tensor.tensor(x))[0].detach().numpy()
    for t in range(7):
        x2 = x.copy()
        x2[:, t:] = rng.standard_normal(x2[:, t:].shape)
        out = m(Tensor.tensor(x2))[0].detach().numpy()
        np.testing.assert_allclose(out[:, :t], base[:, :t], atol=1e-5)


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 5, 8)) for _ in range(3))
    mask = rng.random((5, 5)) > 0.3
    mask[:, 0] = True
    for kwargs, tkwargs in [({}, {}), ({"is_causal": True}, {"is_causal": True}),
                            ({"attn_mask": mask}, {"attn_mask": torch.tensor(mask)})]:
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkwargs)
        tout.sum().backward()
        ours = [Tensor.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = scaled_dot_product_attention(*ours, **kwargs)
        out.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-10)
        for a, ta in zip(ours, (tq, tk, tv)):
            np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-10)


def test_sinusoidal_encoding_rows_are_rotations():
    pe = sinusoidal_encoding(20, 8).numpy()
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1, atol=1e-6)


# --- PyTorch's behaviour and errors (issue 16) --------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(shapes, st.integers(0, 2**31 - 1))
def test_a_float_mask_gets_its_gradient(shape, seed):
    B, H, L, S, E, Ev = shape
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((B, H, L, E)), rng.standard_normal((B, H, S, E)), rng.standard_normal((B, H, S, Ev))
    m = rng.standard_normal((L, S))
    tensors = [Tensor.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    out = scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3])
    assert np.allclose(out.detach().numpy(), reference(q, k, v, m))
    assert gradcheck(lambda a, b, c, d: scaled_dot_product_attention(a, b, c, attn_mask=d), tensors)
    # without a gradient to record, the fused path gives the same values
    plain = scaled_dot_product_attention(*tensors[:3], attn_mask=Tensor.tensor(m))
    assert np.allclose(plain.detach().numpy(), out.detach().numpy())


def attention_error(*shapes, mask=None, dtypes=("float32",) * 3, **kwargs):
    q, k, v = (Tensor.zeros(*s, dtype=d) for s, d in zip(shapes, dtypes))
    with pytest.raises(Exception) as info:
        scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    return type(info.value), str(info.value)


def test_attention_errors_are_pytorch_classes_with_the_shapes():
    kind, message = attention_error((1, 3, 4), (1, 3, 4), (1, 3, 4), mask=np.ones((3, 3), bool), is_causal=True)
    assert kind is RuntimeError and "Explicit attn_mask should not be set when is_causal=True" in message
    kind, message = attention_error((1, 3, 4), (1, 3, 5), (1, 3, 4))
    assert kind is RuntimeError and "(1, 3, 4)" in message and "(1, 3, 5)" in message
    kind, message = attention_error((1, 3, 4), (1, 3, 4), (1, 2, 4))
    assert kind is RuntimeError and "(1, 2, 4)" in message
    kind, message = attention_error((2, 3, 4), (3, 3, 4), (3, 3, 4))
    assert kind is RuntimeError and "broadcast" in message
    kind, message = attention_error((1, 3, 4), (1, 3, 4), (1, 3, 4), mask=np.ones((2, 2), bool))
    assert kind is RuntimeError and "attn_mask (2, 2)" in message
    kind, message = attention_error((1, 3, 4), (1, 3, 4), (1, 3, 4), dtypes=("float32", "float64", "float32"))
    assert kind is RuntimeError and message.startswith("Expected query, key, and value to have the same dtype")


def test_float_mask_gradient_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 6), (3, 5)]]
    ours = [Tensor.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    scaled_dot_product_attention(*ours[:3], attn_mask=ours[3]).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(*theirs[:3], attn_mask=theirs[3]).sum().backward()
    for a, b in zip(ours, theirs):
        assert np.allclose(a.grad.numpy(), b.grad.numpy())
    for call in [lambda t, F: F.scaled_dot_product_attention(t.zeros(1, 3, 4), t.zeros(1, 3, 5), t.zeros(1, 3, 4)),
                 lambda t, F: F.scaled_dot_product_attention(t.zeros(1, 3, 4), t.zeros(1, 3, 4, dtype=t.float64),
                                                             t.zeros(1, 3, 4))]:
        import tinytorch as tt
        with pytest.raises(Exception) as want:
            call(torch, torch.nn.functional)
        with pytest.raises(Exception) as got:
            call(tt, tt.nn.functional)
        assert type(got.value) is type(want.value)
