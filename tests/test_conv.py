"""Module 08's package (tinytorch.conv): convolution, pooling and batch norm against numpy loops that
follow the definitions, central differences, and PyTorch where it is installed (hypothesis shapes)."""
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import tinytorch.conv
from tinytorch.autograd import Tensor, gradcheck
from tinytorch.conv import (AvgPool2d, BatchNorm2d, Conv2d, MaxPool2d, _array_view, _images_last, _pad_images_last,
                            avg_pool2d, batch_norm, conv2d, max_pool2d, unfold_view, window_layout)
from tinytorch.tensor_base import manual_seed

settings.register_profile("tinytorch", max_examples=30, deadline=None)
settings.load_profile("tinytorch")

pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))


def t64(array, grad=True):
    return Tensor.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def padded(x, padding, value=0.0):
    return np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=value)


def out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_loops(x, w, b, stride, padding, dilation):
    """out[n, o, i, j] = b[o] + sum_{c, p, q} w[o, c, p, q] * xpad[n, c, i*s + p*d, j*s + q*d], element by element."""
    xp = padded(x, padding)
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    oh = out_size(x.shape[2], kh, stride[0], padding[0], dilation[0])
    ow = out_size(x.shape[3], kw, stride[1], padding[1], dilation[1])
    out = np.zeros((n, o, oh, ow))
    for idx in np.ndindex(n, o, oh, ow):
        b_, o_, i, j = idx
        total = 0.0 if b is None else b[o_]
        for c_, p, q in np.ndindex(c, kh, kw):
            total += w[o_, c_, p, q] * xp[b_, c_, i * stride[0] + p * dilation[0], j * stride[1] + q * dilation[1]]
        out[idx] = total
    return out


def pool_loops(x, kernel, stride, padding, dilation, kind, count_include_pad=True):
    fill = -np.inf if kind == "max" else 0.0
    xp = padded(x, padding, fill)
    real = padded(np.ones_like(x), padding)
    oh = out_size(x.shape[2], kernel[0], stride[0], padding[0], dilation[0])
    ow = out_size(x.shape[3], kernel[1], stride[1], padding[1], dilation[1])
    out = np.zeros(x.shape[:2] + (oh, ow))
    for n, c, i, j in np.ndindex(*out.shape):
        rows = [i * stride[0] + p * dilation[0] for p in range(kernel[0])]
        cols = [j * stride[1] + q * dilation[1] for q in range(kernel[1])]
        window = xp[n, c][np.ix_(rows, cols)]
        if kind == "max":
            out[n, c, i, j] = window.max()
        else:
            divisor = window.size if count_include_pad else real[n, c][np.ix_(rows, cols)].sum()
            out[n, c, i, j] = window.sum() / divisor
    return out


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar f(x) with respect to every element of the array x."""
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = f(x)
        x[idx] = old - eps
        down = f(x)
        x[idx] = old
        g[idx] = (up - down) / (2 * eps)
    return g


@st.composite
def conv_cases(draw):
    kernel, stride, dilation = draw(pairs), draw(pairs), draw(pairs)
    padding = draw(st.tuples(st.integers(0, 2), st.integers(0, 2)))
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = (draw(st.integers(max(1, d * (k - 1) + 1 - 2 * p), d * (k - 1) + 4))
            for k, d, p in zip(kernel, dilation, padding))
    return (n, c, h, w), (o, c) + kernel, stride, padding, dilation, draw(st.integers(0, 2 ** 16))


@given(conv_cases(), st.booleans())
def test_conv2d_values_and_gradients_match_loops_and_finite_differences(case, with_bias):
    xshape, wshape, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal(xshape), rng.standard_normal(wshape), rng.standard_normal(wshape[0])
    b = b if with_bias else None
    tx, tw, tb = t64(x), t64(w), (t64(b) if with_bias else None)
    out = conv2d(tx, tw, tb, stride, padding, dilation)
    assert np.allclose(out.detach().numpy(), conv_loops(x, w, b, stride, padding, dilation))
    g = rng.standard_normal(out.shape)
    out.backward(Tensor.tensor(g))
    loss = lambda x_, w_, b_: float((conv_loops(x_, w_, b_, stride, padding, dilation) * g).sum())
    assert np.allclose(tx.grad.numpy(), numeric_grad(lambda v: loss(v, w, b), x.copy()), atol=1e-6)
    assert np.allclose(tw.grad.numpy(), numeric_grad(lambda v: loss(x, v, b), w.copy()), atol=1e-6)
    if with_bias:
        assert np.allclose(tb.grad.numpy(), g.sum(axis=(0, 2, 3)))


@given(conv_cases())
def test_conv2d_gradcheck(case):
    xshape, wshape, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    args = (t64(rng.standard_normal(xshape)), t64(rng.standard_normal(wshape)), t64(rng.standard_normal(wshape[0])))
    assert gradcheck(lambda x, w, b: conv2d(x, w, b, stride, padding, dilation), args)


@st.composite
def pool_cases(draw):
    kernel, stride, dilation = draw(pairs), draw(pairs), draw(pairs)
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    h, w = (draw(st.integers(max(1, d * (k - 1) + 1 - 2 * p), d * (k - 1) + 4))
            for k, d, p in zip(kernel, dilation, padding))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w), kernel, stride, padding, dilation, \
        draw(st.integers(0, 2 ** 16))


@given(pool_cases())
def test_max_pool2d_matches_loops_and_routes_gradient_to_first_maximum(case):
    shape, kernel, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(np.float64)  # integers: many ties
    tx = t64(x)
    out = max_pool2d(tx, kernel, stride, padding, dilation)
    assert np.array_equal(out.detach().numpy(), pool_loops(x, kernel, stride, padding, dilation, "max"))
    g = rng.standard_normal(out.shape)
    out.backward(Tensor.tensor(g))
    # the gradient of each window goes to its first maximum in row-major order (PyTorch's rule)
    want = padded(np.zeros_like(x), padding)
    xp = padded(x, padding, -np.inf)
    for n, c, i, j in np.ndindex(*out.shape):
        taps = [(i * stride[0] + p * dilation[0], j * stride[1] + q * dilation[1])
                for p in range(kernel[0]) for q in range(kernel[1])]
        first = max(taps, key=lambda rc: (xp[n, c][rc], -taps.index(rc)))
        want[n, c][first] += g[n, c, i, j]
    want = want[:, :, padding[0]:padding[0] + x.shape[2], padding[1]:padding[1] + x.shape[3]]
    assert np.allclose(tx.grad.numpy(), want)


@given(pool_cases(), st.booleans())
def test_avg_pool2d_matches_loops_and_finite_differences(case, count_include_pad):
    shape, kernel, stride, padding, _, seed = case
    assume(all(s >= k for s, k in zip(shape[2:], kernel)) or any(padding))
    assume(all(s + 2 * p >= k for s, k, p in zip(shape[2:], kernel, padding)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    tx = t64(x)
    out = avg_pool2d(tx, kernel, stride, padding, count_include_pad=count_include_pad)
    want = pool_loops(x, kernel, stride, padding, (1, 1), "avg", count_include_pad)
    assert np.allclose(out.detach().numpy(), want)
    g = rng.standard_normal(out.shape)
    out.backward(Tensor.tensor(g))
    f = lambda v: float((pool_loops(v, kernel, stride, padding, (1, 1), "avg", count_include_pad) * g).sum())
    assert np.allclose(tx.grad.numpy(), numeric_grad(f, x.copy()), atol=1e-6)


@given(st.integers(2, 4), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2 ** 16))
def test_batch_norm_training_and_eval_gradcheck(n, c, hw, seed):
    rng = np.random.default_rng(seed)
    x, w, b = t64(rng.standard_normal((n, c, hw, 2)) * 2 + 1), t64(rng.standard_normal(c)), t64(rng.standard_normal(c))
    assert gradcheck(lambda x, w, b: batch_norm(x, None, None, w, b, training=True, eps=1e-3), (x, w, b))
    rm, rv = Tensor.tensor(rng.standard_normal(c)), Tensor.tensor(rng.random(c) + 0.5)
    assert gradcheck(lambda x, w, b: batch_norm(x, rm, rv, w, b, training=False), (x, w, b))


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6)])
def test_batch_norm_gradcheck_on_2d_and_3d_inputs(shape):
    """batch_norm normalises over every axis but dimension 1 for any rank (as BatchNorm1d's inputs)."""
    rng = np.random.default_rng(len(shape))
    x, w, b = t64(rng.standard_normal(shape) * 2 + 1), t64(rng.standard_normal(3)), t64(rng.standard_normal(3))
    assert gradcheck(lambda x, w, b: batch_norm(x, None, None, w, b, training=True, eps=1e-3), (x, w, b))


@given(st.integers(1, 20), st.sampled_from([(16, 8, 8), (64, 4, 4), (1, 8, 8), (3, 5, 7)]),
       st.sampled_from([np.float32, np.float64]), st.booleans())
def test_layout_copies_keep_every_value(n, chw, dtype, every_other):
    """The given copies into the images-last layout (8 images at a time where the image stride is a
    multiple of 4 KiB, as for the first two shapes) change no value."""
    a = np.random.default_rng(n).standard_normal((2 * n,) + chw).astype(dtype)
    a = a[::2] if every_other else a[:n]  # every other image: a doubled image stride
    last = _images_last(a)
    assert np.array_equal(last, a) and last.strides[0] == a.itemsize
    assert np.array_equal(_pad_images_last(a, (1, 2, 0, 1)), np.pad(a, ((0, 0), (0, 0), (1, 2), (0, 1))))


def test_batch_norm_running_statistics_follow_pytorchs_conventions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5, 2)) * 2 + 3
    rm, rv = Tensor.tensor(np.zeros(3)), Tensor.tensor(np.ones(3))
    out = batch_norm(Tensor.tensor(x), rm, rv, training=True, momentum=0.25).numpy()
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    assert np.allclose(out, (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5))
    assert np.allclose(rm.numpy(), 0.25 * mean)
    assert np.allclose(rv.numpy(), 0.75 + 0.25 * x.var(axis=(0, 2, 3), ddof=1))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        batch_norm(Tensor.tensor(np.ones((1, 3, 1, 1))), None, None, training=True)


def test_batchnorm2d_modes_buffers_and_state_dict():
    bn = BatchNorm2d(3, dtype="float64")
    assert sorted(bn.state_dict()) == ["bias", "num_batches_tracked", "running_mean", "running_var", "weight"]
    assert len(list(bn.parameters())) == 2
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((4, 3, 2, 2)) + k for k in range(3)]
    for x in batches:
        bn(Tensor.tensor(x))
    assert int(bn.num_batches_tracked.item()) == 3
    expected = np.zeros(3)
    for x in batches:
        expected = 0.9 * expected + 0.1 * x.mean(axis=(0, 2, 3))
    assert np.allclose(bn.running_mean.numpy(), expected)
    bn.eval()
    y = rng.standard_normal((2, 3, 2, 2))
    want = (y - bn.running_mean.numpy().reshape(1, 3, 1, 1)) / np.sqrt(bn.running_var.numpy().reshape(1, 3, 1, 1) + 1e-5)
    assert np.allclose(bn(Tensor.tensor(y)).detach().numpy(), want)
    assert int(bn.num_batches_tracked.item()) == 3
    other = BatchNorm2d(3, dtype="float64")
    other.load_state_dict(bn.state_dict())
    assert np.allclose(other.running_var.numpy(), bn.running_var.numpy())
    assert int(other.num_batches_tracked.item()) == 3
    cma = BatchNorm2d(3, momentum=None, dtype="float64")
    for x in batches:
        cma(Tensor.tensor(x))
    assert np.allclose(cma.running_mean.numpy(), np.mean([x.mean(axis=(0, 2, 3)) for x in batches], axis=0))


def test_unfold_view_is_a_zero_copy_view_of_the_windows():
    x = Tensor.tensor(np.arange(2 * 3 * 7 * 6, dtype=np.float64).reshape(2, 3, 7, 6))
    view = unfold_view(x, (3, 2), stride=(2, 1), dilation=(1, 2))
    assert view.storage is x.storage
    assert view.shape == (2, 3, 3, 4, 3, 2)
    a = x.numpy()
    for n, c, i, j in np.ndindex(*view.shape[:4]):
        assert np.array_equal(view.numpy()[n, c, i, j], a[n, c, 2 * i:2 * i + 3, j:j + 3:2])
    t = x.permute(0, 1, 3, 2)  # a non-contiguous input: still a view
    assert unfold_view(t, 2).storage is x.storage
    assert np.array_equal(unfold_view(t, 2).numpy()[0, 0, 1, 2], t.numpy()[0, 0, 1:3, 2:4])


def test_a_window_view_is_checked_against_its_input_before_it_is_made():
    """The given window view checks a layout against the input's memory (module 01's check_layout) before
    numpy's as_strided, which checks nothing: a wrong window count is an error in the cell that uses it,
    never a read of foreign memory that kills the kernel later."""
    a = np.arange(60.0)
    inner = a[10:50].reshape(4, 10)[:, ::-1]  # a view in the middle of its buffer, with a negative stride
    last = _array_view(inner, (4, 10), (10, -1), "a layout")  # ends exactly at the input's last element
    assert np.array_equal(last, inner)
    for shape, strides in [((5, 10), (10, -1)), ((4, 11), (10, -1)), ((4, 10), (10, 1))]:  # one past an end
        with pytest.raises(RuntimeError, match=r"a layout reads outside its input: shape .*, strides .* and "
                                               r"offset 9 reach outside a storage of 40 elements: fix"):
            _array_view(inner, shape, strides, "a layout", hint=": fix")

    def forgets_dilation(shape, strides, kernel_size, stride=(1, 1), dilation=(1, 1)):  # a learner's slip
        windows, window_strides = window_layout(shape, strides, kernel_size, stride, (1, 1))
        return windows, window_strides[:4] + tuple(s * d for s, d in zip(window_strides[4:], dilation))

    x, w = np.ones((1, 1, 7, 7)), np.ones((1, 1, 3, 3))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tinytorch.conv, "window_layout", forgets_dilation)
        with pytest.raises(RuntimeError, match=r"window_layout\(\(1, 1, 7, 7\), .*, \(3, 3\), stride=\(1, 1\), "
                                               r"dilation=\(2, 2\)\) = .* reads outside its "
                                               r"input: .* outside a storage of 49 elements: check its window count"):
            conv2d(Tensor.tensor(x), Tensor.tensor(w), dilation=2)
    assert conv2d(Tensor.tensor(x), Tensor.tensor(w), dilation=2).shape == (1, 1, 3, 3)


def test_errors_name_shapes_and_the_fix():
    x = Tensor.tensor(np.ones((1, 2, 4, 4)))
    with pytest.raises(RuntimeError, match="3 channels, but got 2"):
        conv2d(x, Tensor.tensor(np.ones((1, 3, 3, 3))))
    with pytest.raises(RuntimeError, match="smaller than the effective kernel size 5 x 5"):
        conv2d(x, Tensor.tensor(np.ones((1, 2, 3, 3))), dilation=2)
    with pytest.raises(RuntimeError, match="dtype"):
        conv2d(x, Tensor.tensor(np.ones((1, 2, 3, 3), np.float32)))
    with pytest.raises(RuntimeError, match="half of kernel size"):
        max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="expected 4D input"):
        BatchNorm2d(2)(Tensor.tensor(np.ones((2, 2))))
    with pytest.raises(NotImplementedError, match="groups"):
        Conv2d(2, 2, 3, groups=2)


def test_conv2d_module_initialisation_and_unbatched_input():
    manual_seed(0)
    conv = Conv2d(16, 8, 3, padding="same")
    bound = 1 / math.sqrt(16 * 9)
    assert conv.weight.shape == (8, 16, 3, 3) and sorted(conv.state_dict()) == ["bias", "weight"]
    assert 0.95 * bound < np.abs(conv.weight.detach().numpy()).max() <= bound
    assert 0.5 * bound < np.abs(conv.bias.detach().numpy()).max() <= bound
    x = np.random.default_rng(2).standard_normal((16, 5, 5)).astype(np.float32)
    single = conv(Tensor.tensor(x)).detach().numpy()
    batched = conv(Tensor.tensor(x[None])).detach().numpy()
    assert single.shape == (8, 5, 5) and np.allclose(single, batched[0])
    assert MaxPool2d(2)(Tensor.tensor(np.ones((1, 1, 5, 5)))).shape == (1, 1, 2, 2)
    assert AvgPool2d(3, 1, 1)(Tensor.tensor(np.ones((1, 1, 5, 5)))).shape == (1, 1, 5, 5)


@given(conv_cases(), st.booleans())
def test_against_pytorch(case, pool_ties):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    xshape, wshape, stride, padding, dilation, seed = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, xshape).astype(np.float64) if pool_ties else rng.standard_normal(xshape)
    w, b = rng.standard_normal(wshape), rng.standard_normal(wshape[0])
    ops = [(lambda a, w_, b_: conv2d(a, w_, b_, stride, padding, dilation),
            lambda a, w_, b_: F.conv2d(a, w_, b_, stride, padding, dilation))]
    k = wshape[2:]
    pool_padding = tuple(min(p, kk // 2) for p, kk in zip(padding, k))
    if all(s + 2 * p >= d * (kk - 1) + 1 for s, p, d, kk in zip(xshape[2:], pool_padding, dilation, k)):
        ops.append((lambda a, *_: max_pool2d(a, k, stride, pool_padding, dilation),
                    lambda a, *_: F.max_pool2d(a, k, stride, pool_padding, dilation)))
        for cip in (True, False):
            ops.append((lambda a, *_, cip=cip: avg_pool2d(a, k, stride, pool_padding, count_include_pad=cip),
                        lambda a, *_, cip=cip: F.avg_pool2d(a, k, stride, pool_padding, count_include_pad=cip)))
    for ours, theirs in ops:
        tx, tw, tb = t64(x), t64(w), t64(b)
        px, pw, pb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
        out, ref = ours(tx, tw, tb), theirs(px, pw, pb)
        assert np.allclose(out.detach().numpy(), ref.detach().numpy())
        if not np.isfinite(ref.detach().numpy()).all():
            continue  # a dilated max-pool window wholly in the padding (-inf): no gradient is defined
            # there, and PyTorch's backward picks an element outside the window or aborts
        g = rng.standard_normal(tuple(ref.shape))
        out.backward(Tensor.tensor(g))
        ref.backward(torch.tensor(g))
        for mine, want in ((tx, px), (tw, pw), (tb, pb)):
            if want.grad is not None:
                assert np.allclose(mine.grad.numpy(), want.grad.numpy())


def test_batchnorm2d_against_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for momentum in (0.1, None):
        ours, theirs = BatchNorm2d(3, momentum=momentum, dtype="float64"), torch.nn.BatchNorm2d(3, momentum=momentum).double()
        for training in (True, True, False):
            ours.train(training), theirs.train(training)
            x = rng.standard_normal((4, 3, 3, 2)) * 2 + 1
            tx, px = t64(x), torch.tensor(x, requires_grad=True)
            out, ref = ours(tx), theirs(px)
            g = rng.standard_normal(x.shape)
            out.backward(Tensor.tensor(g))
            ref.backward(torch.tensor(g))
            assert np.allclose(out.detach().numpy(), ref.detach().numpy())
            assert np.allclose(tx.grad.numpy(), px.grad.numpy())
            assert np.allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy())
            ours.weight.grad = ours.bias.grad = theirs.weight.grad = theirs.bias.grad = None
        state = theirs.state_dict()
        assert sorted(ours.state_dict()) == sorted(state)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert np.allclose(ours.state_dict()[name].numpy(), state[name].numpy())


def test_conv2d_module_initialisation_matches_pytorchs_distribution():
    torch = pytest.importorskip("torch")
    manual_seed(0)
    ours = np.concatenate([Conv2d(4, 8, 3).weight.detach().numpy().ravel() for _ in range(20)])
    theirs = np.concatenate([torch.nn.Conv2d(4, 8, 3).weight.detach().numpy().ravel() for _ in range(20)])
    assert abs(np.abs(ours).max() - np.abs(theirs).max()) < 0.01 * np.abs(theirs).max()
    assert abs(ours.std() - theirs.std()) < 0.05 * theirs.std()


def test_cnn_milestone_learns_in_a_shortened_run(tmp_path, monkeypatch, capsys):
    """The CI form of `./course milestone cnn`: 2 epochs (seconds) already put it far above chance, and
    the picture is written."""
    import re
    import shutil
    from pathlib import Path

    from tinytorch_course.kit.milestone import cnn

    repo = Path(__file__).resolve().parent.parent
    shutil.copytree(repo / "milestones", tmp_path / "milestones")
    monkeypatch.chdir(tmp_path)
    cnn(tmp_path, epochs=2)
    shown = capsys.readouterr().out
    accuracy = float(re.search(r"test accuracy ([0-9.]+)%", shown).group(1))
    assert accuracy > 80, shown
    assert (tmp_path / "artifacts" / "milestone-cnn.png").stat().st_size > 10_000
