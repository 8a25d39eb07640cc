"""Module 03's package (tinytorch.autograd): gradients against central differences, numpy and torch."""
import gc
import warnings
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch import autograd as ag
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
    w1 = ag.tensor(rng.standard_normal((4, 8)) * 0.5, requires_grad=True)
    w2 = ag.tensor(rng.standard_normal((8, 1)) * 0.5, requires_grad=True)

    def step():
        loss = (((x @ w1).maximum(0.0) @ w2 - target) ** 2).mean()
        loss.backward()
        with ag.no_grad():
            for w in (w1, w2):
                w.sub_(w.grad * 0.01)
                w.grad = None
        return loss.item()

    first = step()
    # Warm up under tracing first: CPython's free lists (e.g. up to 2,000 spare 2-tuples from the
    # graph walk) fill during the first steps and stay allocated, which is not a leak. A graph kept
    # alive per step would hold its arrays and nodes: over 1 MB across 1,000 steps.
    tracemalloc.start()
    for _ in range(1000):
        step()
    gc.collect()
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
        np.testing.assert_array_equal((a / 0.0).numpy(), expected)
        np.testing.assert_array_equal((a / ag.zeros(3)).numpy(), expected)
        np.testing.assert_array_equal((1.0 / (a * 0.0)).numpy(), [np.inf, -np.inf, np.inf])  # 1/-0 is -inf


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
    assert np.array_equal(y.numpy(), want_out)
    g = rng.standard_normal(want_out.shape).astype(np.float32)
    y.backward(ag.tensor(g))
    want = np.zeros_like(a)
    np.add.at(want, index, g)
    assert np.array_equal(x.grad.numpy(), want)


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
    size = qkv.numpy().nbytes
    q, k, v = qkv.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
    for z in (q, k, v, k.transpose(-2, -1)):
        assert np.shares_memory(z.numpy(), qkv.numpy())
    cases = [(lambda x: x.transpose(0, 1).permute(2, 0, 1).transpose(-1, -2),
              lambda a: a.transpose(1, 0, 2).transpose(2, 0, 1).transpose(0, 2, 1), 1.1),
             (lambda x: x.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4),
              lambda a: a.reshape(b, t, 3, h, d).transpose(2, 0, 3, 1, 4), 2.1)]
    for seed_value, (chain, rearrange, limit) in enumerate(cases):
        qkv.grad = None
        y = chain(qkv)
        assert np.shares_memory(y.numpy(), qkv.numpy())
        seed = ag.tensor(np.random.default_rng(seed_value).standard_normal(y.shape).astype(np.float32))
        tracemalloc.start()
        y.backward(seed)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < limit * size, f"backward allocated {peak / size:.2f}x the gradient (limit {limit})"
        assert np.array_equal(qkv.grad.numpy(), _scatter_back(qkv.shape, rearrange, seed.numpy()))
