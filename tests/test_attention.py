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


def test_causal_attention_ignores_the_future():
    rng = np.random.default_rng(0)
    m = MultiHeadAttention(16, 4, causal=True)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    base = m(Tensor.tensor(x))[0].numpy()
    for t in range(7):
        x2 = x.copy()
        x2[:, t:] = rng.standard_normal(x2[:, t:].shape)
        out = m(Tensor.tensor(x2))[0].numpy()
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
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=1e-10)
        for a, ta in zip(ours, (tq, tk, tv)):
            np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-10)


def test_sinusoidal_encoding_rows_are_rotations():
    pe = sinusoidal_encoding(20, 8).numpy()
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1, atol=1e-6)
