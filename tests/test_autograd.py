"""Module 03's package (tinytorch.autograd): gradients against central differences, numpy and torch."""
import gc
import os
from pathlib import Path
import shutil
import subprocess
import sys
import warnings
import tracemalloc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch import autograd as ag
from tinytorch import autograd_more as more  # module 03's companion notebook
from tinytorch.testing import assert_raises

settings.register_profile("tinytorch-autograd", max_examples=25, deadline=None)
settings.load_profile("tinytorch-autograd")

small_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


def leaf(array, non_contiguous=False):
    """A float64 leaf that requires grad; optionally a non-contiguous (transposed) view."""
    array = np.asarray(array, dtype=np.float64)
    if non_contiguous and array.ndim >= 2:
        base = ag.tensor(np.ascontiguousarray(np.swapaxes(array, 0, -1)))
        return base.transpose(0, -1).detach().requires_grad_()
    return ag.tensor(array).requires_grad_()


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast together, each possibly missing or squeezing dimensions."""
    full = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    def side():
        shape = [1 if draw(st.booleans()) else n for n in full]
        return tuple(shape[draw(st.integers(0, len(shape))):])
    return side(), side()


def arrays(shape, seed, positive=False):
    values = np.random.default_rng(seed).standard_normal(shape)
    return np.abs(values) + 0.5 if positive else values


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
@given(broadcast_pair(), st.integers(0, 1000), st.booleans())
def test_binary_ops_gradcheck_with_broadcasting(op, shapes, seed, non_contiguous):
    a = leaf(arrays(shapes[0], seed, positive=True), non_contiguous)
    b = leaf(arrays(shapes[1], seed + 1, positive=True) + (0.1 if op in ("maximum", "minimum") else 0),
             non_contiguous)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "pow": lambda x, y: x ** y,
          "maximum": lambda x, y: x.maximum(y), "minimum": lambda x, y: x.minimum(y)}[op]
    assert ag.gradcheck(fn, (a, b))


@pytest.mark.parametrize("op", ["neg", "abs", "exp", "log", "sqrt", "square", "rpow", "scalar"])
@given(small_shapes, st.integers(0, 1000), st.booleans())
def test_unary_ops_gradcheck(op, shape, seed, non_contiguous):
    x = leaf(arrays(shape, seed, positive=op in ("log", "sqrt")) + (0.3 if op == "abs" else 0), non_contiguous)
    fn = {"neg": lambda t: -t, "abs": abs, "exp": lambda t: t.exp(), "log": lambda t: t.log(),
          "sqrt": lambda t: t.sqrt(), "square": lambda t: t ** 2, "rpow": lambda t: 2.0 ** t,
          "scalar": lambda t: 3.0 - t / 2.0 * 1.5 + 1.0}[op]
    assert ag.gradcheck(fn, (x,))


@st.composite
def shape_and_dim(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
    dims = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                          st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                                   unique=True).map(tuple)))
    return shape, dims, draw(st.booleans())


@pytest.mark.parametrize("op", ["sum", "mean", "var", "std"])
@given(shape_and_dim(), st.integers(0, 1000), st.booleans())
def test_reductions_gradcheck(op, case, seed, non_contiguous):
    shape, dim, keepdim = case
    x = leaf(arrays(shape, seed), non_contiguous)
    count = np.prod([shape[d] for d in ag.normalize_dims(dim, len(shape))])
    if op in ("var", "std") and count < 2:
        return
    assert ag.gradcheck(lambda t: getattr(t, op)(dim=dim, keepdim=keepdim), (x,))


@given(shape_and_dim(), st.integers(0, 1000))
def test_max_min_gradcheck_and_ties(case, seed):
    shape, dim, keepdim = case
    x = leaf(arrays(shape, seed))
    assert ag.gradcheck(lambda t: t.max(), (x,)) and ag.gradcheck(lambda t: t.min(), (x,))
    if isinstance(dim, int):
        assert ag.gradcheck(lambda t: t.max(dim, keepdim).values * 2.0, (x,))
        assert ag.gradcheck(lambda t: t.min(dim=dim, keepdim=keepdim)[0], (x,))


def test_max_ties_like_pytorch():
    x = ag.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]  # evenly shared
    y = ag.tensor([[3.0, 3.0], [1.0, 2.0]], requires_grad=True)
    values, indices = y.max(dim=1)
    values.sum().backward()
    assert indices.tolist() == [0, 1] and y.grad.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    a, b = ag.tensor([1.0, 2.0], requires_grad=True), ag.tensor([1.0, 0.0], requires_grad=True)
    a.maximum(b).sum().backward()
    assert a.grad.tolist() == [0.5, 1.0] and b.grad.tolist() == [0.5, 0.0]


matmul_shapes = st.sampled_from([((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)),
                                 ((2, 2, 3), (3, 2)), ((3, 2), (4, 2, 1)), ((2, 1, 2, 3), (3, 3, 2)),
                                 ((4, 3), (2, 1, 3, 2))])


@given(matmul_shapes, st.integers(0, 1000), st.booleans())
def test_matmul_gradcheck_batched_and_broadcast(shapes, seed, non_contiguous):
    a, b = leaf(arrays(shapes[0], seed), non_contiguous), leaf(arrays(shapes[1], seed + 1), non_contiguous)
    assert ag.gradcheck(lambda x, y: x @ y, (a, b))


VIEWS = {
    "permute": lambda t: t.permute(*reversed(range(t.ndim))),
    "transpose": lambda t: t.transpose(0, -1),
    "reshape": lambda t: t.reshape(-1),
    "view_of_contiguous": lambda t: t.contiguous().view(t.numel()),
    "flatten": lambda t: t.flatten(),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(1).squeeze(1) * t.unsqueeze(0).squeeze(0),
    "expand": lambda t: t.unsqueeze(0).expand(2, *t.shape),
    "slices": lambda t: t[::2] * 1.0 + t[-1:],
    "narrow": lambda t: t.narrow(0, 1, t.shape[0] - 1),
    "split": lambda t: t.split(1)[0] * t.split(1)[-1],
    "chunk": lambda t: t.chunk(2)[0].sum() * 1.0,
    "repeated_index": lambda t: t[ag.tensor([0, 0, t.shape[0] - 1, 0])],
    "mask": lambda t: t[t.detach() > 0] * 3.0,
    "mT": lambda t: t.mT,
    "iter": lambda t: sum(row * (i + 1.0) for i, row in enumerate(t)),
}


@pytest.mark.parametrize("name", list(VIEWS))
@given(st.lists(st.integers(2, 3), min_size=2, max_size=3).map(tuple), st.integers(0, 1000), st.booleans())
def test_views_and_indexing_gradcheck(name, shape, seed, non_contiguous):
    assert ag.gradcheck(VIEWS[name], (leaf(arrays(shape, seed), non_contiguous),))


@given(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), st.integers(0, 1000))
def test_cat_stack_where_masked_fill_triangles_gradcheck(shape, seed):
    a, b = leaf(arrays(shape, seed)), leaf(arrays(shape, seed + 1))
    assert ag.gradcheck(lambda x, y: ag.cat([x, y * 2.0, x], dim=-1), (a, b))
    assert ag.gradcheck(lambda x, y: ag.stack([x, y], dim=0), (a, b))
    condition = ag.tensor(arrays(shape, seed + 2) > 0)
    assert ag.gradcheck(lambda x, y: ag.where(condition, x, y), (a, b))
    assert ag.gradcheck(lambda x: ag.where(condition, x, 0.0), (a,))
    assert ag.gradcheck(lambda x: x.masked_fill(condition, 5.0), (a,))
    if len(shape) >= 2:
        assert ag.gradcheck(lambda x: x.tril() + x.triu(1) * 2.0, (a,))


def test_setitem_and_inplace_ops_record():
    x = ag.tensor([1.0, 2.0, 3.0], dtype="float64", requires_grad=True)
    v = ag.tensor(5.0, dtype="float64", requires_grad=True)
    y = x * 1.0
    y[1] = v * 2.0
    y.mul_(3.0)
    y.add_(x)
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 1.0, 4.0] and v.grad.item() == 6.0
    assert ag.gradcheck(lambda a: (a * 1.0).mul_(a).add_(2.0), (leaf([1.0, 2.0]),))


def test_diamond_graph_sums_gradients():
    x = ag.tensor([2.0, -1.0], dtype="float64", requires_grad=True)
    h = x.exp()
    y = (h * h + h.log() * h).sum()
    y.backward()
    e = np.exp([2.0, -1.0])
    assert np.allclose(x.grad.numpy(), 2 * e * e + (np.array([2.0, -1.0]) + 1) * e)


def test_deep_chain_has_no_recursion_limit():
    x = ag.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0
    z = x
    for _ in range(100_000):
        z = z + 1.0
    del z  # dropping an un-backwarded deep graph must not crash either
    gc.collect()


def test_graph_is_freed_no_memory_growth_over_1000_steps():
    rng = np.random.default_rng(0)
    x, target = ag.tensor(rng.standard_normal((16, 4))), ag.tensor(rng.standard_normal((16, 1)))
    w1 = ag.tensor(rng.standard_normal((4, 256)) * 0.1, requires_grad=True)
    w2 = ag.tensor(rng.standard_normal((256, 1)) * 0.1, requires_grad=True)
    roots = []

    def step():
        loss = (((x @ w1).maximum(0.0) @ w2 - target) ** 2).mean()
        if not roots:
            roots.append(weakref.ref(loss.grad_fn))
        loss.backward()
        with ag.no_grad():
            for w in (w1, w2):
                w.sub_(w.grad * 0.01)
                w.grad = None
        return loss.item()

    first = step()
    assert roots[0]() is None, "the graph outlived its step: something still refers to its root node"
    # A graph kept alive per step grows memory by its nodes alone (about 750 bytes a step, once
    # backward has dropped its saved arrays) and by 64 KB a step with them: 0.7 to 60 MB across 1,000
    # steps. CPython keeps up to 2,000 spare tuples of each small size (free lists, 110 KB for pairs);
    # gc.collect() empties them and the steps would fill them again, which is not a leak: they are
    # filled before measuring.
    tracemalloc.start()
    for _ in range(1000):
        step()
    gc.collect()
    for size in range(1, 8):
        spare = [tuple([i] * size) for i in range(2000)]
        del spare
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        last = step()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert last < first
    assert after - before < 64 * 1024, f"memory grew by {after - before} bytes over 1,000 steps"


def test_fresh_leaf_gradients_are_kept_and_shared_ones_copied():
    returned = []

    class Scale(ag.Function):  # backward returns a fresh array, or one it keeps on ctx
        @staticmethod
        def forward(ctx, x, keep):
            ctx.keep = keep
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            g = ctx.kept = grad * 3.0
            returned.append(g)
            return (ctx.kept if ctx.keep else g), None

    a = ag.tensor([1.0, 2.0], requires_grad=True)
    Scale.apply(a, False).sum().backward()
    assert a.grad.numpy() is returned[-1] and a.grad.tolist() == [3.0, 3.0]  # no copy needed
    a.grad = None
    y = Scale.apply(a, True).sum()
    y.backward(retain_graph=True)  # the graph may run again: its arrays are not handed over
    assert not np.shares_memory(a.grad.numpy(), returned[-1])
    a.grad.numpy()[...] = 0.0  # what clip_grad_norm_ or zero_grad(set_to_none=False) do
    y.backward()
    assert a.grad.tolist() == [3.0, 3.0]
    b = ag.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()  # Add hands the same array to both inputs
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    seed = ag.tensor([1.0, 1.0])
    b.grad = None
    b.clone().backward(seed)  # Clone returns the caller's own gradient
    assert not np.shares_memory(b.grad.numpy(), seed.numpy())
    b.grad.numpy()[...] = 5.0
    assert seed.tolist() == [1.0, 1.0]


def test_grad_function_leaves_dot_grad_alone():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    h = a * a
    (ga, gh) = ag.grad((h * 3.0).sum(), (a, h))
    assert ga.tolist() == [6.0, 12.0] and gh.tolist() == [3.0, 3.0] and a.grad is None
    unused = ag.tensor(1.0, requires_grad=True)
    assert_raises(RuntimeError, ag.grad, (a * 2.0).sum(), (unused,))
    assert ag.grad((a * 2.0).sum(), (a, unused), allow_unused=True)[1] is None


def test_autograd_state_and_errors():
    a = ag.tensor([1.0, 2.0], requires_grad=True)
    assert a.is_leaf and repr(a).endswith("requires_grad=True)")
    b = a * 2.0
    assert not b.is_leaf and "grad_fn=<MulBackward>" in repr(b)
    d = b.detach()
    assert d.is_leaf and not d.requires_grad and d.storage is b.storage
    assert_raises(RuntimeError, ag.tensor([1, 2]).requires_grad_)
    assert_raises(RuntimeError, a.add_, 1.0)  # a leaf that requires grad
    with ag.no_grad():
        a.add_(1.0)
    assert a.tolist() == [2.0, 3.0] and a._version == 1
    s = a * a
    a.detach().mul_(2.0)  # a detached alias shares the version counter
    assert_raises(RuntimeError, s.sum().backward, match="inplace")
    view = (a * 1.0)[0]
    assert view._version == 0
    y = (a * 1.0).sum()
    y.backward()
    assert_raises(RuntimeError, y.backward, match="retain_graph")
    assert_raises(RuntimeError, (a * 1.0).backward, match="scalar")


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(s) for s in [(3, 4), (4, 2), (2,), (3, 1)]]

    def f(lib, x, w, b, c):
        h = (x @ w + b).exp() / (1.0 + (x @ w + b).exp())
        h = lib.where(h > 0.5, h, h * c)
        return (h.sum(dim=0) ** 2).mean() + h.max() - h.std()

    ours = [ag.tensor(v, requires_grad=True) for v in xs]
    f(ag, *ours).backward()
    theirs = [torch.tensor(v, requires_grad=True) for v in xs]
    f(torch, *theirs).backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_division_by_zero_is_quiet_like_module_01(requires_grad):
    """x/0 is inf and 0/0 nan, as numpy computes them, without a RuntimeWarning (as in PyTorch)."""
    a = ag.tensor([1.0, -1.0, 0.0], requires_grad=requires_grad)
    with np.errstate(all="ignore"):
        expected = np.array([1.0, -1.0, 0.0]) / np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal((a / 0.0).detach().numpy(), expected)
        np.testing.assert_array_equal((a / ag.zeros(3)).detach().numpy(), expected)
        np.testing.assert_array_equal((1.0 / (a * 0.0)).detach().numpy(), [np.inf, -np.inf, np.inf])  # 1/-0 is -inf


def _segments_and_boxes(ax):
    """The drawn edge segments and the node boxes of a plot_graph axes, in display coordinates."""
    ax.figure.canvas.draw()
    boxes = [t.get_bbox_patch().get_window_extent() for t in ax.texts if t.get_bbox_patch() is not None]
    segments = []
    for arrow in ax.texts:
        if arrow.get_bbox_patch() is None and getattr(arrow, "arrow_patch", None) is not None:
            segments.append((ax.transData.transform(arrow.xyann), ax.transData.transform(arrow.xy)))
    return boxes, segments


def _crosses(box, start, end, steps=200):
    """Whether the straight segment start-end passes through the inside of `box` (shrunk by 1 px)."""
    x0, y0, x1, y1 = box.x0 + 1, box.y0 + 1, box.x1 - 1, box.y1 - 1
    return any(x0 < sx < x1 and y0 < sy < y1
               for sx, sy in (start + (end - start) * k / steps for k in range(steps + 1)))


@pytest.mark.parametrize("build", ["diamond", "skip"])
def test_plot_graph_shows_values_and_gradients_and_no_edge_crosses_a_box(build):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a, b = ag.tensor(2.0, requires_grad=True), ag.tensor(3.0, requires_grad=True)
    if build == "diamond":  # the notebook's example: a is used at two depths
        h = (a * b).retain_grad()
        y = (h + a).exp()
    else:  # leaves used one, three and five rows above them
        h = (a * b).retain_grad()
        y = (((h.exp() + b) * a).log() * b + a) * b
    y.backward(retain_graph=True)
    ax = ag.plot_graph(y, names={"a": a, "b": b, "h": h})
    labels = [t.get_text() for t in ax.texts if t.get_bbox_patch() is not None]
    grad_a, grad_h = a.grad.item(), h.grad.item()
    assert any(f"grad {grad_a:.4g}" in s for s in labels if s.startswith("a:")), labels
    assert any(f"value {a.item():.4g}" in s for s in labels if s.startswith("a:")), labels
    assert any(f"grad {grad_h:.4g}" in s and "value 6" in s for s in labels if s.startswith("h:")), labels
    boxes, segments = _segments_and_boxes(ax)
    assert len(boxes) == len(ag._graph_edges(y)[0]) and segments
    for start, end in segments:
        inside = [box for box in boxes if _crosses(box, start, end)]
        assert not inside, f"an edge segment {start} -> {end} passes through a box"
    plt.close(ax.figure)


# ----- issue 16: wrong results fixed, 0-d integer tensors as indices ---------------------------------
def test_pow_gradients_at_zero_follow_pytorch():
    """PyTorch: d(x**0)/dx is 0 even at x = 0; d(a**p)/dp is 0 where a = 0 and p >= 0."""
    x = ag.tensor([0.0, 2.0], requires_grad=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    p = ag.tensor([0.3, 0.0, 2.0, -1.0], requires_grad=True)
    (0.0 ** p).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0, 0.0, -np.inf])
    a, e = ag.tensor([0.0], requires_grad=True), ag.tensor([0.3], requires_grad=True)
    (a ** e).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), [0.0])
    assert np.isinf(a.grad.numpy()[0])  # 0.3 * 0 ** -0.7, as in PyTorch
    z = ag.tensor([0.0, 1.0], requires_grad=True)
    (z ** ag.tensor([0.0, 0.0])).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [0.0, 0.0])


def test_pow_gradients_at_zero_agree_with_torch():
    torch = pytest.importorskip("torch")
    bases, exps = np.array([0.0, 0.0, 0.0, 2.0, 0.5]), np.array([0.0, 0.3, 2.0, 0.0, -1.0])
    ours = [ag.tensor(v, requires_grad=True) for v in (bases, exps)]
    (ours[0] ** ours[1]).sum().backward()
    theirs = [torch.tensor(v, requires_grad=True) for v in (bases, exps)]
    (theirs[0] ** theirs[1]).sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())


def test_int_and_index_tensor_gradient_in_pytorch_order():
    x = leaf(arrays((2, 5, 6), 3))
    idx = ag.tensor([0, 2, 2])
    assert x[1, :, idx].shape == (5, 3)
    assert ag.gradcheck(lambda t: x[1, :, idx] * t, (leaf(arrays((5, 3), 4)),))
    assert ag.gradcheck(lambda t: t[1, :, idx] * 2.0, (x,))
    assert ag.gradcheck(lambda t: t[(0, 1), 2], (x,))
    v = leaf(arrays((5, 3), 5))
    y = ag.zeros(2, 5, 6, dtype="float64") * 1.0
    y[1, :, ag.tensor([0, 2, 4])] = v
    (y * ag.tensor(arrays((2, 5, 6), 6))).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), arrays((2, 5, 6), 6)[1][:, [0, 2, 4]])


def test_zero_dim_integer_tensor_as_index_size_and_range():
    n = ag.tensor(3)
    assert list(range(n)) == [0, 1, 2] and [10, 20, 30, 40][n] == 40
    assert ag.zeros(n, 2).shape == (3, 2) and ag.arange(6.0).view(n, -1).shape == (3, 2)
    assert ag.arange(5)[n].item() == 3 and ag.arange(5)[ag.tensor(1):n].tolist() == [1, 2]
    assert list(range(ag.tensor([2]))) == [0, 1]  # one element of any shape, as in PyTorch
    assert ag.zeros(2, 3).sum(ag.tensor(1)).shape == (2,) and ag.zeros(2, 3).unsqueeze(n - 1).shape == (2, 3, 1)
    assert_raises(TypeError, lambda: range(ag.tensor(2.0)), match="integer tensors of a single element")
    assert_raises(TypeError, lambda: range(ag.tensor([1, 2])), match="single element")


# ----- issue 16: more ops, given at the end of notebook 03 ---------------------------------------------
def torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def test_casts_type_and_data():
    x = ag.tensor([1.5, -2.0, 0.0], requires_grad=True)
    assert x.long().dtype.name == "int64" and x.long().tolist() == [1, -2, 0]
    assert x.int().dtype.name == "int32" and x.bool().tolist() == [True, True, False]
    assert x.double().dtype.name == "float64" and x.float() is not None
    assert x.type() == "tinytorch.FloatTensor" and x.long().type() == "tinytorch.LongTensor"
    assert x.type("torch.DoubleTensor").dtype.name == "float64" and x.type(ag.int64 if hasattr(ag, "int64")
                                                                           else "int64").dtype.name == "int64"
    (x.double() * 2).sum().backward()  # a cast is recorded: the gradient comes back in float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert x.grad.dtype.name == "float32"
    d = x.data
    assert not d.requires_grad and d.grad_fn is None and d.storage is x.storage
    d[0] = 7.0  # writes through, and is not an in-place change the graph would see
    assert x.tolist()[0] == 7.0 and x._version == 0
    y = ag.zeros(2)
    y.data = ag.tensor([3.0, 4.0])
    assert y.tolist() == [3.0, 4.0]


def test_arithmetic_methods_and_matrix_products():
    a, b = ag.tensor([[1.0, 2.0], [3.0, 4.0]]), ag.tensor([[5.0, 6.0], [7.0, 8.0]])
    np.testing.assert_array_equal(a.add(b, alpha=2).numpy(), a.numpy() + 2 * b.numpy())
    np.testing.assert_array_equal(a.sub(1, alpha=2).numpy(), a.numpy() - 2)
    np.testing.assert_array_equal(a.mul(b).numpy(), a.numpy() * b.numpy())
    np.testing.assert_array_equal(a.div(b).numpy(), a.numpy() / b.numpy())
    np.testing.assert_array_equal(a.pow(2).numpy(), a.numpy() ** 2)
    assert_raises(RuntimeError, lambda: ag.tensor([1, 2]).add(1, alpha=0.5), match="alpha")
    np.testing.assert_array_equal(a.t().numpy(), a.numpy().T)
    assert ag.tensor([1.0, 2.0]).t().shape == (2,)
    assert_raises(RuntimeError, lambda: ag.zeros(2, 2, 2).t(), match="<= 2 dimensions")
    np.testing.assert_array_equal(a.mm(b).numpy(), a.numpy() @ b.numpy())
    assert_raises(RuntimeError, lambda: ag.zeros(2).mm(a), match="mm")
    x, y = ag.zeros(2, 3, 4) + 1, ag.zeros(2, 4, 5) + 2
    assert x.bmm(y).shape == (2, 3, 5)
    error = assert_raises(RuntimeError, lambda: x.bmm(ag.zeros(3, 4, 5)))
    assert "[2, 4] but got: [3, 4]" in str(error)
    assert ag.tensor([1.0, 2.0]).dot(ag.tensor([3.0, 4.0])).item() == 11.0
    assert_raises(RuntimeError, lambda: ag.tensor([1.0, 2.0]).dot(ag.tensor([3.0])), match="inconsistent tensor size")
    parts = a.unbind(1)
    assert len(parts) == 2 and parts[1].tolist() == [2.0, 4.0]
    w = leaf(arrays((3, 4), 1))
    assert ag.gradcheck(lambda t: t.unbind(1)[2] * 3.0, (w,))
    assert ag.gradcheck(lambda t: t.t().mm(t), (w,))
    assert ag.gradcheck(lambda t: t.unsqueeze(0).bmm(t.t().unsqueeze(0)), (w,))


def test_companion_methods_come_through_the_hook_and_never_patch_tensor():
    """Module 03's Tensor finds the companion's methods with `__getattr__`, through the package's top level:
    no class of Tensor's MRO holds one (a class's method would silently win), and an unknown name raises
    PyTorch's AttributeError."""
    x = ag.tensor([[3.0, -1.0], [0.5, 2.0]])
    on_classes = {name for cls in type(x).__mro__ for name in vars(cls)}
    handed_on = {"to", "view"}  # module 03's `to`/`view` hand their other forms (a device, view(dtype)) here
    assert set(more.__tensor_methods__) & on_classes == handed_on
    for name, function in more.__tensor_methods__.items():
        if isinstance(function, property):  # x.device, x.is_cuda
            assert getattr(x, name) == function.fget(x), name
        elif name not in handed_on:
            assert getattr(x, name).__func__ is function and getattr(x, name).__self__ is x, name
    assert_raises(AttributeError, lambda: x.no_such_method, match="'Tensor' object has no attribute 'no_such_method'")
    assert not hasattr(x, "_no_such_name") and not hasattr(x, "__no_such_dunder__")
    assert (ag.tensor([7, -3]) // 2).tolist() == [3, -2] and (7 // ag.tensor([2, -3])).tolist() == [3, -3]
    assert (ag.tensor([7, -3]) % 2).tolist() == [1, 1] and (5 % ag.tensor([3])).tolist() == [2]
    assert (ag.tensor([6, 3]) & 5).tolist() == [4, 1] and (5 | ag.tensor([2])).tolist() == [7]
    assert (ag.tensor([6]) ^ 3).tolist() == [5] and (~ag.tensor([True, False])).tolist() == [False, True]


def test_methods_from_module_04_and_the_error_before_it_is_exported(tmp_path):
    x = leaf(arrays((2, 3), 2))
    np.testing.assert_allclose(x.relu().detach().numpy(), np.maximum(x.detach().numpy(), 0))
    np.testing.assert_allclose(x.sigmoid().detach().numpy(), 1 / (1 + np.exp(-x.detach().numpy())))
    np.testing.assert_allclose(x.tanh().detach().numpy(), np.tanh(x.detach().numpy()))
    e = np.exp(x.detach().numpy() - x.detach().numpy().max(1, keepdims=True))
    np.testing.assert_allclose(x.softmax(1).detach().numpy(), e / e.sum(1, keepdims=True))
    np.testing.assert_allclose(x.log_softmax(-1).detach().numpy(), np.log(e / e.sum(1, keepdims=True)))
    assert ag.gradcheck(lambda t: t.log_softmax(1) * t.tanh(), (x,))
    # A learner's package with notebooks 01-03 exported: an operator names the notebook to export; a
    # method that a later module lists in its `__tensor_methods__` is unknown without it, as in PyTorch.
    package = tmp_path / "tinytorch"
    package.mkdir()
    for name in ["__init__.py", "tensor_base.py", "strides.py", "autograd.py", "testing.py"]:
        shutil.copy(Path(ag.__file__).parent / name, package / name)
    script = ("import tinytorch as tt\n"
              "for op in [lambda: tt.tensor([1.0, -1.0]).relu(), lambda: tt.tensor([4]) // 2,\n"
              "           lambda: tt.tensor([1.0]).clamp(0, 1)]:\n"
              "    try:\n        op()\n"
              "    except (RuntimeError, AttributeError) as error:\n        print(type(error).__name__, error)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    relu, floor_divide, clamp = out.stdout.splitlines()
    assert relu == "AttributeError 'Tensor' object has no attribute 'relu'", out.stdout + out.stderr
    # the companion (tinytorch.autograd_more) is exported with notebook 03: an operator names it
    assert "03_autograd_more" in floor_divide and "./learn export 03" in floor_divide, out.stdout
    assert clamp == "AttributeError 'Tensor' object has no attribute 'clamp'", out.stdout


@pytest.mark.parametrize("p", [2, "fro", 1, 3, float("inf")])
@given(shape_and_dim(), st.integers(0, 1000))
def test_norm_against_numpy_and_gradcheck(p, case, seed):
    shape, dim, keepdim = case
    x = leaf(arrays(shape, seed))
    q = 2 if p == "fro" else p
    a = x.detach().numpy()
    want = np.max(np.abs(a), axis=dim, keepdims=keepdim, initial=0) if q == np.inf else \
        np.sum(np.abs(a) ** q, axis=dim, keepdims=keepdim) ** (1 / q)
    np.testing.assert_allclose(x.norm(p, dim, keepdim).detach().numpy(), want, rtol=1e-10)
    if q != np.inf:
        assert ag.gradcheck(lambda t: t.norm(p, dim, keepdim), (x,))
    z = ag.zeros(3, dtype="float64", requires_grad=True)
    z.norm(p).backward()
    np.testing.assert_array_equal(z.grad.numpy(), [0.0, 0.0, 0.0])  # PyTorch's 0 at the zero vector
    assert_raises(RuntimeError, lambda: ag.tensor([1, 2]).norm(), match="floating point")


def test_clamp_values_gradients_and_pytorchs_tie_rule():
    x = ag.tensor([0.0, 0.5, 1.0, 2.0, -1.0], requires_grad=True)
    y = x.clamp(0, 1)
    assert y.tolist() == [0.0, 0.5, 1.0, 1.0, 0.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]  # PyTorch: ties at a bound keep the gradient
    a, lo = ag.tensor([0.0, 0.5, 1.0], requires_grad=True), ag.tensor([0.0, 1.0, 0.0], requires_grad=True)
    a.clamp(lo).sum().backward()
    assert a.grad.tolist() == [1.0, 0.0, 1.0] and lo.grad.tolist() == [0.0, 1.0, 0.0]
    assert ag.tensor([1, 5]).clamp(0, 2.5).tolist() == [1.0, 2.5]  # PyTorch's promotion
    assert ag.tensor([1, 5]).clamp(max=2).dtype.name == "int64"
    assert_raises(RuntimeError, lambda: ag.tensor([1.0]).clamp(), match="At least one")
    b = leaf(arrays((3, 4), 7))
    lo, hi = leaf(arrays((4,), 8) - 0.5), leaf(arrays((3, 1), 9) + 0.5)
    assert ag.gradcheck(lambda t, l, h: t.clamp(l, h), (b, lo, hi))
    torch = torch_or_none()
    if torch is not None:  # bounds that cross (min > max) too
        vals = [np.array(v, dtype=np.float64) for v in ([0.0, 0.5, 1.0, 2.0, -1.0], [0.0, 1.0, 0.5, 3.0, 0.0],
                                                        [1.0, 0.8, 0.5, 1.0, -2.0])]
        ours = [ag.tensor(v, requires_grad=True) for v in vals]
        theirs = [torch.tensor(v, requires_grad=True) for v in vals]
        ours[0].clamp(ours[1], ours[2]).sum().backward()
        theirs[0].clamp(theirs[1], theirs[2]).sum().backward()
        for o, t in zip(ours, theirs):
            np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign"])
def test_piecewise_constant_ops_have_zero_gradient(name):
    x = ag.tensor([-1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 2.7], requires_grad=True)
    y = getattr(x, name)()
    np.testing.assert_array_equal(y.detach().numpy(), getattr(np, {"round": "round"}.get(name, name))(x.detach().numpy()))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(7))
    assert getattr(ag.tensor([3, -2]), name)().dtype.name == "int64"
    assert ag.tensor([0.25, 0.35]).round(decimals=1).tolist() == pytest.approx([0.2, 0.4])


@pytest.mark.parametrize("name", ["sin", "cos", "log2", "rsqrt"])
@given(small_shapes, st.integers(0, 1000))
def test_more_unary_ops_gradcheck(name, shape, seed):
    x = leaf(arrays(shape, seed, positive=name in ("log2", "rsqrt")))
    want = {"sin": np.sin, "cos": np.cos, "log2": np.log2, "rsqrt": lambda a: 1 / np.sqrt(a)}[name](x.detach().numpy())
    np.testing.assert_allclose(getattr(x, name)().detach().numpy(), want, rtol=1e-12)
    assert ag.gradcheck(lambda t: getattr(t, name)(), (x,))
    assert getattr(ag.tensor([1, 4]), name)().dtype.name == "float32"


def test_nan_inf_tests_and_operators():
    x = ag.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert x.isnan().tolist() == [False, True, False, False]
    assert x.isinf().tolist() == [False, False, True, True] and x.isfinite().tolist() == [True, False, False, False]
    i, f = ag.tensor([5, -5, 7]), ag.tensor([5.0, -5.0, 7.5])
    assert (i // 2).tolist() == [2, -3, 3] and (i // 2).dtype.name == "int64"
    assert (f // 2).tolist() == [2.0, -3.0, 3.0] and (i % 3).tolist() == [2, 1, 1] and (f % 3).tolist() == [2.0, 1.0, 1.5]
    assert (7 // ag.tensor([2, -2])).tolist() == [3, -4] and (7 % ag.tensor([2, -2])).tolist() == [1, -1]
    assert (i // 2.0).dtype.name == "float32"
    assert_raises(RuntimeError, lambda: i // 0, match="ZeroDivisionError")
    assert_raises(RuntimeError, lambda: i % ag.tensor([1, 0, 1]), match="ZeroDivisionError")
    b, c = ag.tensor([True, False, True]), ag.tensor([True, True, False])
    assert (b & c).tolist() == [True, False, False] and (b | c).tolist() == [True, True, True]
    assert (b ^ c).tolist() == [False, True, True] and (~b).tolist() == [False, True, False]
    assert (ag.tensor([6, 3]) & 5).tolist() == [4, 1] and (~ag.tensor([0, 5])).tolist() == [-1, -6]
    assert (b & ag.tensor([1, 2, 3])).tolist() == [1, 0, 1] and (True ^ b).tolist() == [False, True, False]
    assert_raises(NotImplementedError, lambda: f & f, match="integer and bool")
    assert_raises(TypeError, lambda: ~f, match="integer and Boolean")
    a, d = leaf(arrays((3, 4), 3) * 3), leaf(arrays((4,), 4, positive=True))
    assert ag.gradcheck(lambda s, t: s % t, (a, d))
    q = ag.tensor([5.0, 7.0], requires_grad=True) // 2
    assert q.requires_grad  # recorded, and backward through it is PyTorch's error
    assert_raises(RuntimeError, q.sum().backward, match="floor_divide")


@given(shape_and_dim(), st.integers(0, 1000))
def test_flip_repeat_cumsum_prod_logsumexp(case, seed):
    shape, dim, _ = case
    x = leaf(arrays(shape, seed))
    a = x.detach().numpy()
    d = 0 if dim is None else dim[0] if isinstance(dim, tuple) else dim
    np.testing.assert_array_equal(x.flip(d).detach().numpy(), np.flip(a, d) if shape else a)
    reps = (2,) + (1, 3)[:len(shape)] + (1,) * max(len(shape) - 2, 0)
    np.testing.assert_array_equal(x.repeat(*reps).detach().numpy(), np.tile(a, reps))
    np.testing.assert_allclose(x.cumsum(d).detach().numpy(), np.cumsum(a, axis=d) if shape else a)
    np.testing.assert_allclose(x.prod(d).detach().numpy(), np.prod(a, axis=d))
    np.testing.assert_allclose(x.prod().detach().numpy(), np.prod(a))
    np.testing.assert_allclose(x.logsumexp(dim).detach().numpy(), np.log(np.sum(np.exp(a), axis=dim)), rtol=1e-12)
    for fn in (lambda t: t.flip(d), lambda t: t.repeat(*reps), lambda t: t.cumsum(d), lambda t: t.prod(d), lambda t: t.prod(),
               lambda t: t.logsumexp(dim, keepdim=True)):
        assert ag.gradcheck(fn, (x,))


def test_prod_gradient_with_zeros_and_stable_logsumexp():
    x = ag.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 3.0]], dtype="float64", requires_grad=True)
    x.prod(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]])
    assert ag.gradcheck(lambda t: t.prod(), (ag.tensor([1.5, 0.0, 2.0], dtype="float64", requires_grad=True),))
    big = ag.tensor([1000.0, 1000.0, -float("inf")])
    assert big.logsumexp(0).item() == pytest.approx(1000.0 + np.log(2.0))
    assert ag.tensor([-float("inf")] * 2).logsumexp(0).item() == -float("inf")
    assert ag.tensor([2, 3]).prod().dtype.name == "int64" and ag.tensor([2, 3]).prod().item() == 6


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.integers(0, 1000), st.data())
def test_gather_scatter_index_select_against_numpy(shape, seed, data):
    rng = np.random.default_rng(seed)
    x = leaf(arrays(shape, seed))
    d = data.draw(st.integers(0, len(shape) - 1))
    ishape = tuple(int(rng.integers(1, n + 1)) for n in shape)
    index = ag.tensor(rng.integers(0, shape[d], size=ishape))
    want = np.take_along_axis(x.detach().numpy()[tuple(slice(0, n) if k != d else slice(None) for k, n in enumerate(ishape))],
                              index.numpy(), axis=d)
    np.testing.assert_array_equal(x.gather(d, index).detach().numpy(), want)
    assert ag.gradcheck(lambda t: t.gather(d, index), (x,))
    unique = ag.tensor(np.argsort(rng.random(shape), axis=d)[tuple(slice(0, n) for n in ishape)])  # no repeats
    src = leaf(arrays(shape, seed + 1))
    out = x.scatter(d, unique, src)
    np.testing.assert_array_equal(out.detach().numpy(), _scatter_reference(x.detach().numpy(), d, unique.numpy(), src.detach().numpy()))
    assert ag.gradcheck(lambda t, s: t.scatter(d, unique, s), (x, src))
    assert x.scatter(d, unique, value=2.5).detach().numpy()[_grid(unique.numpy(), d)].tolist() == \
        np.full(ishape, 2.5).tolist()
    picks = ag.tensor(rng.integers(0, shape[d], size=3))
    np.testing.assert_array_equal(x.index_select(d, picks).detach().numpy(), np.take(x.detach().numpy(), picks.numpy(), axis=d))
    assert ag.gradcheck(lambda t: t.index_select(d, picks), (x,))


def _grid(index, d):
    grid = list(np.indices(index.shape, sparse=True))
    grid[d] = index
    return tuple(grid)


def _scatter_reference(a, d, index, src):
    out = a.copy()
    for position in np.ndindex(*index.shape):
        target = list(position)
        target[d] = index[position]
        out[tuple(target)] = src[position]
    return out


def test_scatter_inplace_and_index_errors():
    x = ag.zeros(2, 3)
    x.scatter_(1, ag.tensor([[2], [0]]), ag.tensor([[5.0], [6.0]]))
    assert x.tolist() == [[0.0, 0.0, 5.0], [6.0, 0.0, 0.0]]
    w = ag.zeros(2, 3, requires_grad=True)
    h = w * 1.0
    h.scatter_(1, ag.tensor([[2], [0]]), value=1.0)
    (h * ag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    assert w.grad.tolist() == [[1.0, 2.0, 0.0], [0.0, 5.0, 6.0]]
    assert_raises(RuntimeError, lambda: x.gather(1, ag.tensor([[3]])), match="out of bounds for dimension 1 with size 3")
    assert_raises(RuntimeError, lambda: x.gather(1, ag.tensor([[1.0]])), match="int64")
    assert_raises(RuntimeError, lambda: x.gather(1, ag.tensor([1])), match="same number of dimensions")
    assert_raises(RuntimeError, lambda: x.index_select(0, ag.tensor([[0]])), match="vector")


@given(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), st.integers(0, 1000), st.booleans(), st.data())
def test_sort_argsort_topk_against_numpy(shape, seed, descending, data):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, size=shape).astype(np.float64)  # many ties
    x = ag.tensor(values, requires_grad=True)
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    result = x.sort(d, descending=descending)
    key = -values if descending else values
    order = np.argsort(key, axis=d, kind="stable")  # equal values keep their order, as PyTorch's stable sort
    np.testing.assert_array_equal(result.indices.numpy(), order)
    np.testing.assert_array_equal(result.values.detach().numpy(), np.take_along_axis(values, order, axis=d))
    values_, indices_ = result  # a tuple too
    assert indices_ is result.indices and x.argsort(d, descending=descending).tolist() == order.tolist()
    k = data.draw(st.integers(0, shape[d]))
    top = x.topk(k, d, largest=not descending)
    np.testing.assert_array_equal(np.sort(top.values.detach().numpy(), axis=d),
                                  np.sort(np.take(np.sort(values, axis=d), range(shape[d] - k, shape[d]) if not descending
                                                  else range(k), axis=d), axis=d))
    np.testing.assert_array_equal(top.values.detach().numpy(), np.take_along_axis(values, top.indices.numpy(), axis=d))
    assert ag.gradcheck(lambda t: t.sort(d, descending=descending).values * ag.tensor(np.arange(values.size).reshape(shape) * 1.0),
                        (leaf(rng.standard_normal(shape)),))
    assert_raises(RuntimeError, lambda: x.topk(shape[d] + 1, d), match="out of range")


def test_sort_and_topk_agree_with_torch():
    torch = pytest.importorskip("torch")
    v = np.array([[3.0, 1.0, 3.0, float("nan"), 2.0], [0.0, 0.0, -1.0, 5.0, 5.0]])
    for descending in (False, True):
        ours, theirs = ag.tensor(v).sort(1, descending=descending), torch.tensor(v).sort(stable=True, dim=1, descending=descending)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    np.testing.assert_array_equal(ag.tensor(v[1:]).topk(2).values.numpy(), torch.tensor(v[1:]).topk(2).values.numpy())


def test_any_all():
    x = ag.tensor([[0.0, 1.0], [0.0, 0.0]])
    assert x.any().item() is True and x.all().item() is False
    assert x.any(1).tolist() == [True, False] and x.all(0, keepdim=True).tolist() == [[False, False]]
    assert ag.tensor([True, True]).all().dtype.name == "bool"


def test_factories():
    np.testing.assert_array_equal(more.eye(3).numpy(), np.eye(3, dtype=np.float32))
    assert more.eye(2, 3, dtype="int64").tolist() == [[1, 0, 0], [0, 1, 0]]
    np.testing.assert_allclose(more.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    assert more.linspace(0, 1, 5).dtype.name == "float32" and more.linspace(2, 3, 0).shape == (0,)
    ag.manual_seed(3) if hasattr(ag, "manual_seed") else None
    from tinytorch.tensor_base import manual_seed, Generator
    manual_seed(3)
    r = more.rand(2, 3)
    manual_seed(3)
    assert r.shape == (2, 3) and more.rand(2, 3).tolist() == r.tolist() and 0 <= r.numpy().min() < r.numpy().max() < 1
    assert more.rand(2, generator=Generator(1), requires_grad=True).requires_grad
    assert_raises(RuntimeError, lambda: more.rand(2, dtype="int64"), match="floating")
    i = more.randint(3, 7, (1000,), generator=Generator(0))
    assert i.dtype.name == "int64" and set(i.tolist()) == {3, 4, 5, 6}
    assert more.randint(5, size=(2, 2)).shape == (2, 2) and more.randint(2, (3,)).numpy().max() < 2
    assert_raises(RuntimeError, lambda: more.randint(5, 5, (2,)), match="from=5 >= to=5")
    assert more.empty(2, 3).shape == (2, 3) and more.empty((4,), dtype="int64").dtype.name == "int64"
    assert more.tril(ag.ones(3, 3)).tolist() == np.tril(np.ones((3, 3))).tolist()
    assert more.triu(ag.ones(2, 3), 1).tolist() == np.triu(np.ones((2, 3)), 1).tolist()


def test_multinomial_frequencies_and_errors():
    from tinytorch.tensor_base import Generator
    p = ag.tensor([0.1, 0.0, 0.6, 0.3])
    draws = more.multinomial(p, 20000, replacement=True, generator=Generator(0))
    assert draws.shape == (20000,) and draws.dtype.name == "int64"
    np.testing.assert_allclose(np.bincount(draws.numpy(), minlength=4) / 20000, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    rows = ag.tensor([[1.0, 1.0, 0.0, 2.0], [0.0, 5.0, 5.0, 0.0]])
    picks = rows.multinomial(2, generator=Generator(1))
    assert picks.shape == (2, 2) and all(len(set(r)) == 2 for r in picks.tolist())
    assert set(picks.tolist()[1]) == {1, 2}  # zero-probability categories are never drawn
    again = rows.multinomial(2, generator=Generator(1))
    assert again.tolist() == picks.tolist()  # seeded
    firsts = np.bincount([more.multinomial(ag.tensor([1.0, 3.0]), 1, generator=Generator(s)).item() for s in range(2000)])
    assert abs(firsts[1] / 2000 - 0.75) < 0.04  # without replacement, the first draw follows p
    assert_raises(RuntimeError, lambda: more.multinomial(ag.tensor([1.0, 0.0]), 2), match="without replacement")
    assert_raises(RuntimeError, lambda: more.multinomial(ag.tensor([-1.0, 2.0]), 1), match="< 0")
    assert_raises(RuntimeError, lambda: more.multinomial(ag.zeros(2, 2, 2), 1), match="1 or 2 dim")


def test_function_forms():
    x = ag.tensor([[3.0, -1.0], [0.5, 2.0]])
    assert more.clamp(x, 0, 1).tolist() == x.clamp(0, 1).tolist()
    assert more.sort(x, 1).indices.tolist() == [[1, 0], [0, 1]] and more.topk(x, 1).values.tolist() == [[3.0], [2.0]]
    assert more.mm(x, more.eye(2)).tolist() == x.tolist() and more.norm(x).item() == pytest.approx(np.sqrt(14.25))


ORACLE_OPS = {  # name: fn(t, lib) written once for both libraries (TinyTorch's methods are PyTorch's)
    "clamp": lambda t, lib: t.clamp(-0.5, 0.5), "floor": lambda t, lib: t.floor(), "ceil": lambda t, lib: t.ceil(),
    "round": lambda t, lib: t.round(), "trunc": lambda t, lib: t.trunc(), "sign": lambda t, lib: t.sign(),
    "sin": lambda t, lib: t.sin(), "cos": lambda t, lib: t.cos(), "log2": lambda t, lib: (t * t + 0.5).log2(),
    "rsqrt": lambda t, lib: (t * t + 0.5).rsqrt(), "flip": lambda t, lib: t.flip(0, 1),
    "repeat": lambda t, lib: t.repeat(2, 1, 3), "cumsum": lambda t, lib: t.cumsum(1),
    "prod": lambda t, lib: t.prod(1), "prod_all": lambda t, lib: t.prod(), "logsumexp": lambda t, lib: t.logsumexp(1),
    "norm": lambda t, lib: t.norm(), "norm1": lambda t, lib: t.norm(1, 1), "norm3": lambda t, lib: t.norm(3, 0, True),
    "t_mm": lambda t, lib: t.t().mm(t), "bmm": lambda t, lib: t.unsqueeze(0).bmm(t.t().unsqueeze(0)),
    "dot": lambda t, lib: t[0].dot(t[1]), "unbind": lambda t, lib: t.unbind(1)[2],
    "gather": lambda t, lib: t.gather(1, lib.tensor([[0, 3], [2, 2], [1, 0]])),
    "scatter": lambda t, lib: t.scatter(1, lib.tensor([[3], [0], [1]]), t[:, :1] * 2.0),
    "index_select": lambda t, lib: t.index_select(1, lib.tensor([3, 0, 3])),
    "sort": lambda t, lib: t.sort(1).values, "sort_desc": lambda t, lib: t.sort(0, descending=True).values,
    "topk": lambda t, lib: t.topk(2).values, "remainder": lambda t, lib: t % 0.7,
    "rremainder": lambda t, lib: 2.5 % (t * t + 1), "floordiv": lambda t, lib: t // 0.3, "add_alpha": lambda t, lib: t.add(t * t, alpha=2),
    "sub_alpha": lambda t, lib: t.sub(t * t, alpha=0.5), "relu": lambda t, lib: t.relu(),
    "sigmoid": lambda t, lib: t.sigmoid(), "tanh": lambda t, lib: t.tanh(), "softmax": lambda t, lib: t.softmax(1),
    "log_softmax": lambda t, lib: t.log_softmax(0), "index_mixed": lambda t, lib: t[1:, lib.tensor([0, 2])][0],
}


@pytest.mark.parametrize("name", list(ORACLE_OPS))
def test_more_ops_values_and_gradients_agree_with_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.standard_normal((3, 4))
    ours, theirs = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = ORACLE_OPS[name](ours, ag), ORACLE_OPS[name](theirs, torch)
    np.testing.assert_allclose(out_ours.numpy() if not out_ours.requires_grad else out_ours.detach().numpy(),
                               out_theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    seed = rng.standard_normal(tuple(out_theirs.shape))
    if name in ("floordiv", "rremainder"):  # PyTorch has no derivative here (TinyTorch: // neither)
        assert_raises(RuntimeError, out_theirs.backward, torch.tensor(seed), match="not implemented")
        if name == "floordiv":
            assert_raises(RuntimeError, out_ours.backward, ag.tensor(seed), match="not implemented")
        return
    out_ours.backward(ag.tensor(seed))
    out_theirs.backward(torch.tensor(seed))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-12)


def _index_strategy():
    """Indices of an array of shape (5, 6): basic (ints, slices, None, ...) or one integer array."""
    basic = st.one_of(st.integers(-5, 4), st.builds(slice, st.none() | st.integers(-5, 5),
                                                    st.none() | st.integers(-5, 5), st.sampled_from([None, 1, 2, 3])))
    rows = st.lists(st.integers(0, 4), min_size=0, max_size=7)
    return st.one_of(basic, st.tuples(basic, st.integers(-6, 5)), st.tuples(st.just(Ellipsis), st.integers(0, 5)),
                     st.tuples(basic, st.none(), st.builds(slice, st.integers(0, 3), st.just(None))),
                     rows.map(lambda r: np.array(r, dtype=np.int64)),
                     rows.map(lambda r: np.array(sorted(set(r)), dtype=np.int64)),
                     st.tuples(st.builds(slice, st.integers(0, 2), st.just(None)),
                               rows.map(lambda r: np.array(sorted(set(r)), dtype=np.int64))))


@settings(max_examples=80, deadline=None)
@given(index=_index_strategy(), seed=st.integers(0, 2**16))
def test_index_backward_equals_the_scatter_add(index, seed):
    """Every index's gradient is numpy's unbuffered scatter-add of the output gradient (whichever path
    the backward takes: a write into a view, or np.add.at)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    want_out = a[index]
    x = ag.tensor(a, requires_grad=True)
    t_index = ag.tensor(index) if isinstance(index, np.ndarray) else \
        tuple(ag.tensor(i) if isinstance(i, np.ndarray) else i for i in index) if isinstance(index, tuple) else index
    y = x[t_index]
    assert np.array_equal(y.detach().numpy(), want_out)
    g = rng.standard_normal(want_out.shape).astype(np.float32)
    y.backward(ag.tensor(g))
    want = np.zeros_like(a)
    np.add.at(want, index, g)
    assert np.array_equal(x.grad.numpy(), want)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), data=st.data())
def test_index_and_select_backward_lay_the_gradient_out_as_their_input(shape, data):
    """On a permuted view, the gradient of x[i] (Index) and of select(x, i) has x's axis order, so that
    undoing the permute gives a C-contiguous array (no copy in the permute's and view's backward)."""
    from tinytorch.attention import Select, select
    perm = data.draw(st.permutations(range(len(shape))))
    base = ag.tensor(np.arange(float(np.prod(shape))).reshape(shape), requires_grad=True)
    x = base.permute(*perm)
    i = data.draw(st.integers(0, x.shape[0] - 1))
    g = np.random.default_rng(0).standard_normal(x.shape[1:])
    inverse = tuple(np.argsort(perm))
    for node, backward in ((x[i].grad_fn, ag.Index.backward), (select(x, i).grad_fn, Select.backward)):
        with ag.no_grad():
            got, _ = backward(node, g)
        want = np.zeros(x.shape)
        want[i] = g
        np.testing.assert_array_equal(got, want)
        assert np.transpose(got, inverse).flags.c_contiguous


def test_index_backward_scatters_only_where_a_position_repeats(monkeypatch):
    """Basic and sorted unique indices never call np.add.at; repeated or unsorted ones do."""
    calls = []

    class CountingAdd:  # numpy's add, counting its scatter-adds
        def __call__(self, *args, **kwargs):
            return np.add(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(np.add, name)

        def at(self, *args):
            calls.append(args[1])
            return np.add.at(*args)

    class Numpy:  # what tinytorch.autograd sees as `np`
        add = CountingAdd()

        def __getattr__(self, name):
            return getattr(np, name)

    monkeypatch.setattr(ag, "np", Numpy())
    x = ag.tensor(np.arange(24.0).reshape(4, 6), requires_grad=True)
    for index in [0, -1, (slice(None), 2), (1, slice(1, 5, 2)), ag.tensor([0, 2, 3]), (slice(None), ag.tensor([1, 4]))]:
        x[index].sum().backward()
    assert calls == []
    x.grad = None
    x[ag.tensor([3, 1, 3])].sum().backward()
    x[ag.tensor([2, 1])].sum().backward()
    x[ag.tensor([-1, 0])].sum().backward()  # negative: not known to be sorted after wrapping
    assert len(calls) == 3
    assert x.grad.numpy()[:, 0].tolist() == [1, 1 + 1, 1, 2 + 1]


def _scatter_back(shape, rearrange, grad):
    """The gradient of `rearrange` (numpy views only) at an array of `shape`: each element back home."""
    positions = rearrange(np.arange(int(np.prod(shape))).reshape(shape))
    out = np.zeros(int(np.prod(shape)), grad.dtype)
    out[positions.ravel()] = grad.ravel()
    return out.reshape(shape)


def test_view_permute_transpose_chains_copy_nothing_forward_and_only_what_backward_needs():
    """q, k, v = qkv.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4) and transposes are views of qkv's storage.
    Backward of permute/transpose chains allocates only qkv's .grad (one gradient's size); a view back
    to (b, t, 3c) adds the one copy that reshaping a non-contiguous gradient needs (the engine then
    copies that reshaped view into .grad: 2 sizes; an engine that kept it would need 1)."""
    b, t, h, d = 4, 32, 4, 32
    c = h * d
    qkv = ag.tensor(np.random.default_rng(0).standard_normal((b, t, 3 * c)).astype(np.float32), requires_grad=True)
    size = qkv.detach().numpy().nbytes
    q, k, v = qkv.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
    for z in (q, k, v, k.transpose(-2, -1)):
        assert np.shares_memory(z.detach().numpy(), qkv.detach().numpy())
    cases = [(lambda x: x.transpose(0, 1).permute(2, 0, 1).transpose(-1, -2),
              lambda a: a.transpose(1, 0, 2).transpose(2, 0, 1).transpose(0, 2, 1), 1.1),
             (lambda x: x.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4),
              lambda a: a.reshape(b, t, 3, h, d).transpose(2, 0, 3, 1, 4), 2.1)]
    for seed_value, (chain, rearrange, limit) in enumerate(cases):
        qkv.grad = None
        y = chain(qkv)
        assert np.shares_memory(y.detach().numpy(), qkv.detach().numpy())
        seed = ag.tensor(np.random.default_rng(seed_value).standard_normal(y.shape).astype(np.float32))
        tracemalloc.start()
        y.backward(seed)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < limit * size, f"backward allocated {peak / size:.2f}x the gradient (limit {limit})"
        assert np.array_equal(qkv.grad.numpy(), _scatter_back(qkv.shape, rearrange, seed.numpy()))
