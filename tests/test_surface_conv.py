"""Module 08's companion (tinytorch.conv_more): conv1d/conv3d and groups, transposed convolution, pooling with
ceil_mode and indices, max_unpool2d, interpolate, BatchNorm1d/3d. Each against a numpy loop that follows
PyTorch's definition, central differences for gradients, and PyTorch itself where it is installed."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tinytorch as tt
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch import conv_more
from tinytorch.autograd import Tensor, gradcheck, grad
from tinytorch.tensor_base import manual_seed

settings.register_profile("tinytorch", max_examples=30, deadline=None)
settings.load_profile("tinytorch")


def t64(array, requires_grad=True):
    return Tensor.tensor(np.asarray(array, dtype=np.float64), requires_grad=requires_grad)


# ---------------------------------------------------------------- numpy references, from the definitions

def conv_ref(x, w, b, stride, padding, dilation, groups):
    """out[n, o, *P] = b[o] + sum over c in o's group and offsets k of w[o, c, *k] * xpad[n, c, P*s + k*d]."""
    d = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    o, cg = w.shape[:2]
    out_size = [(s - dl * (k - 1) - 1) // st + 1 for s, k, st, dl in zip(xp.shape[2:], w.shape[2:], stride, dilation)]
    out = np.zeros((x.shape[0], o, *out_size))
    for oc in range(o):
        first = oc // (o // groups) * cg
        for k in np.ndindex(*w.shape[2:]):
            window = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + (out_size[i] - 1) * stride[i] + 1, stride[i])
                           for i in range(d))
            out[:, oc] += np.einsum("nc...,c->n...", xp[(slice(None), slice(first, first + cg), *window)],
                                    w[(oc, slice(None), *k)])
        out[:, oc] += 0 if b is None else b[oc]
    return out


def conv_transpose_ref(x, w, stride, padding, output_padding, dilation, groups):
    """Each input element x[n, i, *p] adds x * w[i, j, *k] at output position p*s + k*d - padding."""
    d = x.ndim - 2
    cin, cg = w.shape[:2]
    full = [(i - 1) * s + dl * (k - 1) + 1 + op
            for i, s, dl, k, op in zip(x.shape[2:], stride, dilation, w.shape[2:], output_padding)]
    out = np.zeros((x.shape[0], cg * groups, *full))
    for ic in range(cin):
        first = ic // (cin // groups) * cg
        for k in np.ndindex(*w.shape[2:]):
            window = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + (x.shape[2 + i] - 1) * stride[i] + 1, stride[i])
                           for i in range(d))
            out[(slice(None), slice(first, first + cg), *window)] += np.einsum("n...,j->nj...", x[:, ic], w[(ic, slice(None), *k)])
    return out[(slice(None), slice(None), *(slice(p, f - p) for p, f in zip(padding, full)))]


def pool_size(size, k, s, p, d, ceil_mode):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= size + p else out


def max_pool_ref(x, k, s, p, d, ceil_mode):
    """Values and flat indices, window by window: the first maximum, a NaN wins."""
    n, c, h, w = x.shape
    oh, ow = (pool_size(size, k[i], s[i], p[i], d[i], ceil_mode) for i, size in enumerate((h, w)))
    values, indices = np.zeros((n, c, oh, ow), x.dtype), np.zeros((n, c, oh, ow), np.int64)
    for a, b, i, j in np.ndindex(n, c, oh, ow):
        best, where = None, None
        for pi, qi in np.ndindex(*k):
            r, col = i * s[0] - p[0] + pi * d[0], j * s[1] - p[1] + qi * d[1]
            if 0 <= r < h and 0 <= col < w:
                v = x[a, b, r, col]
                if best is None or v > best or (np.isnan(v) and not np.isnan(best)):
                    best, where = v, r * w + col
        values[a, b, i, j], indices[a, b, i, j] = best, where
    return values, indices


def avg_pool_ref(x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    """PyTorch's divisor: the window clipped to the padded input, or to the input alone."""
    n, c, h, w = x.shape
    oh, ow = (pool_size(size, k[i], s[i], p[i], 1, ceil_mode) for i, size in enumerate((h, w)))
    out = np.zeros((n, c, oh, ow))
    for i, j in np.ndindex(oh, ow):
        r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
        r1, c1 = min(r0 + k[0], h + p[0]), min(c0 + k[1], w + p[1])
        padded_count = (r1 - r0) * (c1 - c0)
        r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
        total = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3))
        divisor = divisor_override or (padded_count if count_include_pad else (r1 - r0) * (c1 - c0))
        out[:, :, i, j] = total / divisor
    return out


def linear_sources(n_in, n_out, align_corners, factor=None):
    """PyTorch's source positions for linear modes (float64): (first, second, weight of second)."""
    if align_corners:
        x = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0)
    else:
        scale = n_in / n_out if factor is None else 1 / factor
        x = np.maximum((np.arange(n_out) + 0.5) * scale - 0.5, 0)
    first = np.minimum(np.floor(x).astype(int), n_in - 1)
    return first, np.minimum(first + 1, n_in - 1), np.clip(x - first, 0, 1)


def interpolate_ref(x, sizes, mode, align_corners):
    """Element by element: a product of one weight per dimension over the 2**d neighbours."""
    d = x.ndim - 2
    out = np.zeros(x.shape[:2] + tuple(sizes))
    if mode == "nearest":
        rows = [np.minimum(np.floor(np.arange(o) * np.float32(np.float32(i) / np.float32(o))).astype(int), i - 1)
                for i, o in zip(x.shape[2:], sizes)]
        return x[(slice(None), slice(None), *np.ix_(*rows))]
    sources = [linear_sources(i, o, align_corners) for i, o in zip(x.shape[2:], sizes)]
    for position in np.ndindex(*sizes):
        for corner in np.ndindex(*(2,) * d):
            index, weight = [], 1.0
            for axis, (pos, which) in enumerate(zip(position, corner)):
                first, second, t = sources[axis]
                index.append((first, second)[which][pos])
                weight *= (1 - t[pos], t[pos])[which]
            out[(slice(None), slice(None), *position)] += weight * x[(slice(None), slice(None), *index)]
    return out


# ---------------------------------------------------------------- convolution

conv_dims = st.integers(1, 3)


@st.composite
def conv_cases(draw):
    d = draw(conv_dims)
    groups = draw(st.sampled_from([1, 2]))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 2)) for _ in range(d)]
    dilation = [draw(st.integers(1, 2)) for _ in range(d)]
    padding = [draw(st.integers(0, 2)) for _ in range(d)]
    size = [max(draw(st.integers(1, 5)), dl * (k - 1) + 1 - 2 * p) for k, dl, p in zip(kernel, dilation, padding)]
    return d, groups, cg, og, kernel, stride, dilation, padding, size, draw(st.integers(0, 2 ** 16))


@given(conv_cases())
def test_convolution_of_every_dimension_and_groups_follows_the_definition(case):
    d, groups, cg, og, kernel, stride, dilation, padding, size, seed = case
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((2, cg * groups, *size)), rng.standard_normal((og * groups, cg, *kernel))
    b = rng.standard_normal(og * groups)
    out = [conv_more.conv1d, conv_more.conv2d, conv_more.conv3d][d - 1](t64(x), t64(w), t64(b), stride, padding,
                                                                         dilation, groups)
    assert np.allclose(out.detach().numpy(), conv_ref(x, w, b, stride, padding, dilation, groups))


@given(conv_cases(), st.integers(0, 1))
def test_transposed_convolution_follows_the_definition(case, extra):
    d, groups, cg, og, kernel, stride, dilation, padding, size, seed = case
    rng = np.random.default_rng(seed)
    output_padding = [min(extra, max(s, dl) - 1) for s, dl in zip(stride, dilation)]
    padding = [min(p, ((i - 1) * s + dl * (k - 1)) // 2) for p, i, s, dl, k in zip(padding, size, stride, dilation, kernel)]
    x, w = rng.standard_normal((2, cg * groups, *size)), rng.standard_normal((cg * groups, og, *kernel))
    f = [conv_more.conv_transpose1d, conv_more.conv_transpose2d, conv_more.conv_transpose3d][d - 1]
    out = f(t64(x), t64(w), None, stride, padding, output_padding, groups, dilation)
    assert np.allclose(out.detach().numpy(), conv_transpose_ref(x, w, stride, padding, output_padding, dilation, groups))


@pytest.mark.parametrize("call", [
    lambda x, w, b: conv_more.conv1d(x[:, :, 0], w[:, :, 0], b, stride=2, padding=1, dilation=2, groups=2),
    lambda x, w, b: conv_more.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2),
    lambda x, w, b: conv_more.conv2d(x, w, b, padding="same", groups=2),
    lambda x, w, b: conv_more.conv3d(x[:, :, None], w[:, :, None], b, padding=(1, 0, 1), groups=2),
    lambda x, w, b: conv_more.conv_transpose2d(x, w, b[:2], stride=2, padding=1, output_padding=1, dilation=2),
], ids=["conv1d", "conv2d-groups", "conv2d-same", "conv3d", "conv_transpose2d"])
def test_gradients_match_central_differences(call):
    rng = np.random.default_rng(0)
    x, w, b = t64(rng.standard_normal((2, 4, 4, 3))), t64(rng.standard_normal((4, 2, 2, 2))), t64(rng.standard_normal(4))
    assert gradcheck(call, (x, w, b))


def test_a_depthwise_convolution_filters_each_channel_alone():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((3, 1, 3, 3))
    out = conv_more.conv2d(t64(x), t64(w), groups=3, padding=1).detach().numpy()
    for c in range(3):
        alone = conv_more.conv2d(t64(x[:, c:c + 1]), t64(w[c:c + 1]), padding=1).detach().numpy()
        assert np.allclose(out[:, c:c + 1], alone)


def test_transposed_convolution_is_the_backward_of_a_convolution():
    """The companion's optional exercise, done here: conv2d's input gradient is conv_transpose2d."""
    rng = np.random.default_rng(2)
    x, w = t64(rng.standard_normal((2, 3, 4, 5)), False), t64(rng.standard_normal((3, 2, 3, 3)), False)
    stride, padding = 2, 1
    size = [(i - 1) * stride - 2 * padding + 3 for i in x.shape[2:]]
    zeros = t64(np.zeros((2, 2, *size)))
    (backward,) = grad(conv_more.conv2d(zeros, w, stride=stride, padding=padding), [zeros], grad_outputs=x)
    assert np.allclose(backward.numpy(), conv_more.conv_transpose2d(x, w, stride=stride, padding=padding).numpy())


def test_a_plain_conv2d_runs_module_08s_conv2d_function(monkeypatch):
    calls, original = [], conv_more._ThreadedConv2d

    class Counting:
        @staticmethod
        def apply(*args):
            calls.append(args[0].shape)
            return original.apply(*args)
    monkeypatch.setattr(conv_more, "_ThreadedConv2d", Counting)
    conv_more.conv2d(t64(np.ones((1, 2, 4, 4))), t64(np.ones((3, 2, 3, 3))))
    conv_more.conv2d(t64(np.ones((1, 2, 4, 4))), t64(np.ones((2, 1, 3, 3))), groups=2)
    assert calls == [(1, 2, 4, 4)]


# ---------------------------------------------------------------- pooling and unpooling

@st.composite
def pool_cases(draw):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    size = tuple(draw(st.integers(k, 7)) for k in kernel)
    return kernel, stride, padding, size, draw(st.booleans()), draw(st.integers(0, 2 ** 16))


@given(pool_cases(), st.sampled_from([1, 2]), st.booleans())
def test_max_pool2d_values_and_indices_follow_the_definition(case, dilation, ties):
    kernel, stride, padding, size, ceil_mode, seed = case
    rng = np.random.default_rng(seed)
    dil = (dilation, dilation)
    if any(s + 2 * p < dilation * (k - 1) + 1 for s, p, k in zip(size, padding, kernel)):
        dil = (1, 1)
    x = rng.integers(-2, 3, (2, 2, *size)).astype(np.float64) if ties else rng.standard_normal((2, 2, *size))
    try:
        values, indices = max_pool_ref(x, kernel, stride, padding, dil, ceil_mode)
    except TypeError:  # a dilated window wholly in the padding: refused (see test_errors)
        return
    out, where = conv_more.max_pool2d(t64(x), kernel, stride, padding, dil, ceil_mode, return_indices=True)
    assert np.array_equal(out.detach().numpy(), values) and np.array_equal(where.numpy(), indices)
    g = rng.standard_normal(values.shape)
    xt = t64(x)
    conv_more.max_pool2d(xt, kernel, stride, padding, dil, ceil_mode).backward(Tensor.tensor(g))
    want = np.zeros((4, size[0] * size[1]))
    np.add.at(want, (np.arange(4)[:, None], indices.reshape(4, -1)), g.reshape(4, -1))
    assert np.allclose(xt.grad.numpy(), want.reshape(x.shape))


def test_max_pool2d_takes_integers_and_unbatched_input_and_keeps_nan():
    x = np.arange(50, dtype=np.int32).reshape(2, 5, 5) * np.int32(-7) % 23
    out = conv_more.max_pool2d(Tensor.tensor(x), 2, ceil_mode=True)
    assert out.dtype == tt.int32 and np.array_equal(out.numpy(), max_pool_ref(x[None], (2, 2), (2, 2), (0, 0), (1, 1), True)[0][0])
    y = np.ones((1, 1, 2, 2))
    y[0, 0, 1, 0] = np.nan
    assert np.isnan(conv_more.max_pool2d(t64(y), 2).detach().numpy()).all()
    for lowest in (np.full((1, 1, 3, 3), -np.inf), np.full((1, 1, 3, 3), np.iinfo(np.int32).min, np.int32)):
        # every element ties with the padding: the index is the window's first real element (PyTorch's)
        out, where = conv_more.max_pool2d(Tensor.tensor(lowest), 2, 2, 1, return_indices=True)
        assert np.array_equal(where.numpy(), [[[[0, 1], [3, 4]]]]) and (out.numpy() == lowest.min()).all()


@given(pool_cases(), st.booleans(), st.sampled_from([None, 3]))
def test_avg_pool2d_with_ceil_mode_divides_as_pytorch(case, count_include_pad, divisor):
    kernel, stride, padding, size, ceil_mode, seed = case
    x = np.random.default_rng(seed).standard_normal((2, 2, *size))
    out = conv_more.avg_pool2d(t64(x), kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    assert np.allclose(out.detach().numpy(), avg_pool_ref(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor))


def test_pooling_gradients_match_central_differences():
    x = t64(np.random.default_rng(3).standard_normal((1, 2, 5, 6)))
    assert gradcheck(lambda a: conv_more.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=True), (x,))
    assert gradcheck(lambda a: conv_more.max_pool2d(a, 2, ceil_mode=True), (x,))
    assert gradcheck(lambda a: conv_more.max_unpool2d(*conv_more.max_pool2d(a, 2, return_indices=True), 2), (x,))


def test_max_unpool2d_puts_each_value_back_at_its_index():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 6, 4))
    pooled, where = conv_more.max_pool2d(t64(x), 2, return_indices=True)
    out = conv_more.max_unpool2d(pooled, where, 2, output_size=(2, 3, 7, 5)).detach().numpy()
    want = np.zeros((2, 3, 7 * 5))  # an index is flat in the output's plane, whatever its size
    for n, c in np.ndindex(2, 3):
        for value, index in zip(pooled.detach().numpy()[n, c].ravel(), where.numpy()[n, c].ravel()):
            assert x[n, c].ravel()[index] == value
            want[n, c, index] = value
    assert np.array_equal(out, want.reshape(2, 3, 7, 5))
    again = conv_more.MaxUnpool2d(2)(pooled[0], where[0]).detach().numpy()  # unbatched, the default size
    assert again.shape == (3, 6, 4) and np.array_equal(again, np.where(again != 0, x[0], 0))
    assert (again != 0).sum() == 3 * 3 * 2


# ---------------------------------------------------------------- interpolate

INTERPOLATIONS = [("nearest", (2, 2, 5), None), ("nearest", (1, 2, 4, 3), None), ("nearest", (1, 1, 2, 3, 2), None),
                  *((mode, shape, corners) for mode, shape in (("linear", (2, 2, 5)), ("bilinear", (1, 2, 4, 3)),
                                                              ("trilinear", (1, 1, 2, 3, 2))) for corners in (False, True))]


@pytest.mark.parametrize("mode,shape,align_corners", INTERPOLATIONS)
@pytest.mark.parametrize("grow", [True, False])
def test_interpolate_follows_pytorchs_source_positions(mode, shape, align_corners, grow):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape)
    sizes = [2 * s + 1 if grow else max(1, s - 2) for s in shape[2:]]
    out = conv_more.interpolate(t64(x), size=sizes, mode=mode, align_corners=align_corners)
    assert np.allclose(out.detach().numpy(), interpolate_ref(x, sizes, mode, align_corners))
    assert gradcheck(lambda a: conv_more.interpolate(a, size=sizes, mode=mode, align_corners=align_corners), (t64(x),))


def test_interpolate_copies_a_dimension_that_keeps_its_size():
    """3 rows at scale 1.3 stay 3 rows, copied (as PyTorch), not read at floor(i / 1.3) = 0, 0, 1."""
    x = np.random.default_rng(12).standard_normal((1, 2, 3, 4))
    nearest = conv_more.interpolate(t64(x), scale_factor=(1.3, 2), mode="nearest").detach().numpy()
    assert np.array_equal(nearest, np.repeat(x, 2, axis=3))
    bilinear = conv_more.interpolate(t64(x), scale_factor=(1.3, 2), mode="bilinear").detach().numpy()
    rows = conv_more.interpolate(t64(x.reshape(1, 6, 4)), scale_factor=2, mode="linear").detach().numpy()
    assert np.allclose(bilinear, rows.reshape(1, 2, 3, 8))


def test_interpolate_by_scale_factor_uses_its_reciprocal():
    x = np.random.default_rng(6).standard_normal((1, 1, 5))
    out = conv_more.interpolate(t64(x), scale_factor=1.5, mode="linear").detach().numpy()  # 7 outputs
    first, second, t = linear_sources(5, 7, False, factor=1.5)
    assert np.allclose(out[0, 0], x[0, 0, first] * (1 - t) + x[0, 0, second] * t)
    assert not np.allclose(out, conv_more.interpolate(t64(x), size=7, mode="linear").detach().numpy())
    assert np.allclose(conv_more.interpolate(t64(x), scale_factor=1.5, mode="linear", recompute_scale_factor=True)
                       .detach().numpy(), conv_more.interpolate(t64(x), size=7, mode="linear").detach().numpy())


# ---------------------------------------------------------------- batch norm and the layers

@pytest.mark.parametrize("layer,shape", [(conv_more.BatchNorm1d, (6, 3)), (conv_more.BatchNorm1d, (4, 3, 5)),
                                         (conv_more.BatchNorm3d, (2, 3, 2, 3, 2))])
def test_batch_norm_of_1d_and_3d_input(layer, shape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape) * 2 + 1
    bn = layer(3, dtype="float64")
    out = bn(t64(x, False)).detach().numpy()
    axes = (0, *range(2, len(shape)))
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    assert np.allclose(out, (x - mean) / np.sqrt(var + 1e-5))
    count = x.size // 3
    assert np.allclose(bn.running_var.numpy(), 0.9 + 0.1 * var.ravel() * count / (count - 1))
    assert gradcheck(lambda a: layer(3, dtype="float64")(a), (t64(x),))
    bn.eval()
    assert np.allclose(bn(t64(x, False)).detach().numpy(),
                       (x - bn.running_mean.numpy().reshape(mean.shape)) / np.sqrt(bn.running_var.numpy().reshape(mean.shape) + 1e-5))


@pytest.mark.parametrize("layer,args,weight", [
    (conv_more.Conv1d, (4, 6, 3), (6, 4, 3)), (conv_more.Conv2d, (4, 6, (2, 3), 1, 0, 1, 2), (6, 2, 2, 3)),
    (conv_more.Conv3d, (2, 4, 2), (4, 2, 2, 2, 2)), (conv_more.ConvTranspose2d, (4, 6, 3, 2, 1, 1, 2), (4, 3, 3, 3)),
    (conv_more.ConvTranspose1d, (2, 4, 3, 2), (2, 4, 3)), (conv_more.ConvTranspose3d, (2, 2, 2), (2, 2, 2, 2, 2))])
def test_conv_layers_hold_pytorchs_weight_layout_and_initialisation(layer, args, weight):
    manual_seed(0)
    conv = layer(*args, dtype="float64")
    fan_in = math.prod(weight[1:])
    assert conv.weight.shape == weight and sorted(conv.state_dict()) == ["bias", "weight"]
    assert 0.9 / math.sqrt(fan_in) < np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    assert np.abs(conv.bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    x = t64(np.random.default_rng(8).standard_normal((2, args[0], *(5,) * (len(weight) - 2))))
    assert gradcheck(conv, (x,))


def test_the_top_level_names_are_the_companions():
    for name in ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool2d",
                 "AvgPool2d", "MaxUnpool2d", "BatchNorm1d", "BatchNorm3d"]:
        assert getattr(nn, name) is getattr(conv_more, name)
    for name in ["conv1d", "conv2d", "conv3d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "max_unpool2d",
                 "interpolate"]:
        assert getattr(F, name) is getattr(conv_more, name) and getattr(tt, name) is getattr(conv_more, name)
    assert nn.BatchNorm2d is tt.conv.BatchNorm2d and F.batch_norm is tt.conv.batch_norm
    pooled, where = nn.MaxPool2d(2, return_indices=True, ceil_mode=True)(t64(np.ones((1, 1, 3, 3))))
    assert pooled.shape == where.shape == (1, 1, 2, 2)
    assert nn.AvgPool2d(2, ceil_mode=True)(t64(np.ones((1, 1, 3, 3)))).shape == (1, 1, 2, 2)


# ---------------------------------------------------------------- errors, as PyTorch raises them

X, W = np.zeros((1, 2, 5, 5)), np.zeros((2, 2, 3, 3))
ERRORS = [  # (call on a library, error class, PyTorch's message: ours starts with it)
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(W), padding=(1, 1, 1)), RuntimeError,
     "expected padding to be a single integer value or a list of 2 values to match the convolution dimensions, "
     "but got padding=[1, 1, 1]"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(W), stride=(1, 1, 1)), RuntimeError, "expected stride to be a single"),
    (lambda lib: lib.F.conv1d(lib.t(X[0]), lib.t(W[..., 0]), padding=(1, 1)), RuntimeError,
     "expected padding to be a single integer value or a list of 1 values"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(W), padding="foo"), RuntimeError, "Invalid padding string: 'foo'"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(W), padding="same", stride=2), RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(W), padding=-1), RuntimeError, "negative padding is not supported"),
    (lambda lib: lib.nn.Conv2d(2, 2, 3, padding="same", stride=2), ValueError,
     "padding='same' is not supported for strided convolutions"),
    (lambda lib: lib.nn.Conv2d(2, 2, 3, padding="foo"), ValueError,
     "Invalid padding string 'foo', should be one of {"),  # PyTorch prints a set: its order varies
    (lambda lib: lib.nn.Conv2d(2, 3, 3, groups=2), ValueError, "out_channels must be divisible by groups"),
    (lambda lib: lib.nn.Conv2d(3, 2, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(np.zeros((3, 1, 3, 3))), groups=2), RuntimeError,
     "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size [[3, 1, 3, 3]]"),
    (lambda lib: lib.F.conv2d(lib.t(X), lib.t(np.zeros((4, 3, 3, 3))), groups=2), RuntimeError,
     "Given groups=2, weight of size [4, 3, 3, 3], expected input[1, 2, 5, 5] to have 6 channels, but got 2 "
     "channels instead"),
    (lambda lib: lib.F.conv_transpose2d(lib.t(X), lib.t(np.zeros((3, 2, 3, 3)))), RuntimeError,
     "Given transposed=1, weight of size [3, 2, 3, 3], expected input[1, 2, 5, 5] to have 3 channels"),
    (lambda lib: lib.F.conv_transpose2d(lib.t(X), lib.t(W), stride=2, output_padding=2), RuntimeError,
     "output padding must be smaller than either stride or dilation, but got output_padding_height: 2 "
     "output_padding_width: 2 stride_height: 2 stride_width: 2 dilation_height: 1 dilation_width: 1"),
    (lambda lib: lib.F.max_pool2d(lib.t(X), 2, padding=(1, 1, 1)), RuntimeError,
     "max_pool2d: padding must either be a single int, or a tuple of two ints"),
    (lambda lib: lib.F.max_pool2d(lib.t(X), (2, 2, 2)), RuntimeError,
     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    (lambda lib: lib.F.avg_pool2d(lib.t(X), 2, stride=(1, 1, 1)), RuntimeError,
     "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints"),
    (lambda lib: lib.F.max_pool2d(lib.t(X), 2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1"),
    (lambda lib: lib.F.max_pool2d(lib.t(X[0, 0]), 2), RuntimeError,
     "non-empty 3D or 4D (batch mode) tensor expected for input"),
    (lambda lib: lib.nn.BatchNorm1d(2)(lib.t(np.zeros((2, 2, 3, 3)))), ValueError, "expected 2D or 3D input (got 4D input)"),
    (lambda lib: lib.nn.BatchNorm3d(2)(lib.t(np.zeros((2, 2, 3, 3)))), ValueError, "expected 5D input (got 4D input)"),
    (lambda lib: lib.F.interpolate(lib.t(X), scale_factor=2, align_corners=True), ValueError,
     "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"),
    (lambda lib: lib.F.interpolate(lib.t(X)), ValueError, "either size or scale_factor should be defined"),
    (lambda lib: lib.F.interpolate(lib.t(X), size=3, scale_factor=2), ValueError,
     "only one of size or scale_factor should be defined"),
    (lambda lib: lib.F.interpolate(lib.t(X[0]), scale_factor=2, mode="bilinear"), NotImplementedError,
     "Got 3D input, but bilinear mode needs 4D input"),
    (lambda lib: lib.F.interpolate(lib.t(X), scale_factor=2, mode="foo"), NotImplementedError,
     "Input Error: Only 3D, 4D and 5D input Tensors supported (got 4D) for the modes: nearest | linear | bilinear | "
     "bicubic | trilinear | lanczos | area | nearest-exact (got foo)"),
    (lambda lib: lib.F.max_unpool2d(lib.t(X), lib.t(np.full((1, 2, 5, 5), 100)), 2), RuntimeError,
     "Found an invalid max index: 100 (output volumes are of size 10x10)"),
    (lambda lib: lib.F.max_unpool2d(lib.t(X), lib.t(np.zeros((1, 2, 5, 5), np.int64)), 2, output_size=(3, 3)),
     ValueError, 'invalid output_size "(3, 3)" (dim 0 must be between 8 and 12)'),
]


class _Lib:
    def __init__(self, top, nn_, functional):
        self.t, self.nn, self.F = top.tensor, nn_, functional


@pytest.mark.parametrize("call,error,message", ERRORS)
def test_errors_have_pytorchs_class_and_message(call, error, message):
    with pytest.raises(error) as raised:
        call(_Lib(tt, nn, F))
    assert str(raised.value).startswith(message)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(error) as theirs:  # the table is PyTorch's: checked against it where installed
        call(_Lib(torch, torch.nn, torch.nn.functional))
    assert str(theirs.value).startswith(message)


def test_errors_of_our_own_name_the_numbers():
    one = t64(np.ones((1, 1, 1, 1)))
    with pytest.raises(RuntimeError, match=r"wholly in the padding .*dilation \(2, 2\)"):
        conv_more.max_pool2d(one, 2, 1, padding=1, dilation=2, return_indices=True)
    assert conv_more.max_pool2d(one, 2, 1, padding=1, dilation=2).item() == -np.inf  # without indices: PyTorch's -inf
    with pytest.raises(RuntimeError, match=r"smaller than the effective kernel size 5 x 5 x 5"):
        conv_more.conv3d(t64(np.ones((1, 1, 4, 4, 4))), t64(np.ones((1, 1, 3, 3, 3))), dilation=2)
    with pytest.raises(RuntimeError, match=r"Input type \(tinytorch.float32\) and weight/bias type \(tinytorch.float64\)"):
        conv_more.conv1d(Tensor.zeros(1, 2, 4), t64(np.zeros((2, 2, 3))))
    with pytest.raises(NotImplementedError, match="'bicubic' is not supported"):
        conv_more.interpolate(t64(np.ones((1, 1, 4, 4))), scale_factor=2, mode="bicubic")


# ---------------------------------------------------------------- PyTorch, the oracle

@given(conv_cases(), st.booleans())
def test_convolutions_against_pytorch(case, transposed):
    torch = pytest.importorskip("torch")
    d, groups, cg, og, kernel, stride, dilation, padding, size, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, cg * groups, *size))
    if transposed:
        padding = [min(p, ((i - 1) * s + dl * (k - 1)) // 2) for p, i, s, dl, k in zip(padding, size, stride, dilation, kernel)]
        w, b = rng.standard_normal((cg * groups, og, *kernel)), rng.standard_normal(og * groups)
        name, args = f"conv_transpose{d}d", (stride, padding, 0, groups, dilation)
    else:
        w, b = rng.standard_normal((og * groups, cg, *kernel)), rng.standard_normal(og * groups)
        name, args = f"conv{d}d", (stride, padding, dilation, groups)
    ours = [t64(a) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out, ref = getattr(F, name)(*ours, *args), getattr(torch.nn.functional, name)(*theirs, *args)
    assert np.allclose(out.detach().numpy(), ref.detach().numpy())
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(Tensor.tensor(g))
    ref.backward(torch.tensor(g))
    for mine, want in zip(ours, theirs):
        assert np.allclose(mine.grad.numpy(), want.grad.numpy())


@given(pool_cases(), st.booleans())
def test_pooling_against_pytorch(case, count_include_pad):
    torch = pytest.importorskip("torch")
    kernel, stride, padding, size, ceil_mode, seed = case
    x = np.random.default_rng(seed).standard_normal((2, 2, *size))
    for name, args in (("max_pool2d", (kernel, stride, padding, 1, ceil_mode, True)),
                       ("avg_pool2d", (kernel, stride, padding, ceil_mode, count_include_pad))):
        out, ref = getattr(F, name)(t64(x), *args), getattr(torch.nn.functional, name)(torch.tensor(x), *args)
        if name == "max_pool2d":
            assert np.array_equal(out[1].numpy(), ref[1].numpy())
            out, ref = out[0], ref[0]
        assert np.allclose(out.detach().numpy(), ref.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,shape", [("nearest", (1, 2, 5, 7)), ("linear", (1, 2, 9)), ("bilinear", (1, 2, 5, 7)),
                                        ("trilinear", (1, 1, 3, 4, 5))])
def test_interpolate_against_pytorch(mode, shape, dtype):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(9).standard_normal(shape).astype(dtype)
    for kwargs in ({"scale_factor": 2}, {"scale_factor": 0.7}, {"scale_factor": 1.3}, {"size": 6}, {"size": 3}):
        for ac in ([None] if mode == "nearest" else [False, True]):
            ours, theirs = Tensor.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
            out = F.interpolate(ours, mode=mode, align_corners=ac, **kwargs)
            ref = torch.nn.functional.interpolate(theirs, mode=mode, align_corners=ac, **kwargs)
            assert np.allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-6), (kwargs, ac)
            g = np.random.default_rng(10).standard_normal(tuple(ref.shape)).astype(dtype)
            out.backward(Tensor.tensor(g))
            ref.backward(torch.tensor(g))
            assert np.allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-5), (kwargs, ac)


@pytest.mark.parametrize("layer,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                         ("BatchNorm3d", (2, 3, 2, 3, 2))])
def test_batch_norm_against_pytorch(layer, shape):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(11).standard_normal(shape)
    ours, theirs = getattr(nn, layer)(3, dtype="float64"), getattr(torch.nn, layer)(3).double()
    for _ in range(2):
        assert np.allclose(ours(t64(x, False)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy())
    assert np.allclose(ours.running_var.numpy(), theirs.running_var.numpy())
