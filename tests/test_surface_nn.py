"""PyTorch's surface of torch.nn on TinyTorch (issue 42, module 04 and its companion tinytorch.nn_more):
state dicts as PyTorch writes them, the class losses with weight= and spatial axes, pad's modes,
binary_cross_entropy, hardsigmoid and softsign; each against numpy or finite differences, and against
PyTorch where it is installed (those tests skip without it)."""
import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import Tensor, gradcheck


def t64(array, grad=True):
    return Tensor.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def raised(fn, *args, **kwargs):
    """(class, message) of what fn raises."""
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value)


def log_softmax_np(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


# --- state dicts: tied weights and buffers, PyTorch's errors -------------------------------------------

def models(torch):
    """Two small models written against `torch` (PyTorch or TinyTorch): one ties its output layer to its
    embedding as nanoGPT does, one keeps a causal mask as a registered buffer as minGPT does."""
    nn_ = torch.nn

    class Tied(nn_.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn_.ModuleDict(dict(wte=nn_.Embedding(5, 3), ln_f=nn_.LayerNorm(3)))
            self.lm_head = nn_.Linear(3, 5, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

    class Buffered(nn_.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn_.Linear(3, 3)
            self.register_buffer("bias", torch.tril(torch.ones(4, 4)).view(1, 1, 4, 4))
            self.register_buffer("scratch", torch.zeros(2), persistent=False)

    return Tied, Buffered


def test_state_dict_lists_a_tied_weight_under_each_name_and_loads_it_strictly():
    Tied, _ = models(tinytorch)
    model = Tied()
    state = model.state_dict()
    assert sorted(state) == ["lm_head.weight", "transformer.ln_f.bias", "transformer.ln_f.weight",
                             "transformer.wte.weight"]
    assert len(list(model.parameters())) == 3  # the tied weight is one parameter
    values = {name: np.random.default_rng(0).standard_normal(v.shape) for name, v in state.items()}
    values["lm_head.weight"] = values["transformer.wte.weight"]
    other = Tied()
    assert tuple(map(list, other.load_state_dict(values))) == ([], [])
    assert np.allclose(other.lm_head.weight.detach().numpy(), values["lm_head.weight"])
    assert other.lm_head.weight is other.transformer.wte.weight
    kind, message = raised(other.load_state_dict, {k: v for k, v in values.items() if k != "lm_head.weight"})
    assert kind is RuntimeError and message == ('Error(s) in loading state_dict for Tied:\n\t'
                                                'Missing key(s) in state_dict: "lm_head.weight". ')


def test_buffers_load_strictly_and_a_non_persistent_buffer_is_not_in_the_state_dict():
    _, Buffered = models(tinytorch)
    model = Buffered()
    state = model.state_dict()
    assert list(state) == ["attn.weight", "attn.bias", "bias"] and "scratch" not in state
    kind, message = raised(model.load_state_dict, {k: v for k, v in state.items() if k != "bias"})
    assert kind is RuntimeError and 'Missing key(s) in state_dict: "bias". ' in message
    kind, message = raised(model.load_state_dict, dict(state, scratch=np.ones(2)))
    assert kind is RuntimeError and 'Unexpected key(s) in state_dict: "scratch". ' in message
    mask = np.triu(np.ones((1, 1, 4, 4)))
    model.load_state_dict(dict(state, bias=mask))
    assert np.array_equal(model.bias.numpy(), mask)
    assert model.load_state_dict({"bias": mask}, strict=False) == (["attn.weight", "attn.bias"], [])


def test_load_errors_are_pytorch_s_runtime_error_and_nothing_is_written():
    layer = nn.Linear(2, 3)
    before = layer.bias.detach().numpy().copy()
    bad = {"weight": np.zeros((4, 2)), "bias": np.ones(3), "extra": np.ones(1)}
    kind, message = raised(layer.load_state_dict, bad)
    assert kind is RuntimeError and message == (
        'Error(s) in loading state_dict for Linear:\n\t'
        'Unexpected key(s) in state_dict: "extra". \n\t'
        'size mismatch for weight: copying a param with shape torch.Size([4, 2]) from checkpoint, '
        'the shape in current model is torch.Size([3, 2]).')
    kind, message = raised(layer.load_state_dict, bad, strict=False)  # a shape is wrong whatever strict says
    assert kind is RuntimeError and "Unexpected" not in message and "size mismatch for weight" in message
    assert np.array_equal(layer.bias.detach().numpy(), before)


def test_pytorch_loads_our_state_dicts_and_we_load_its_own_with_the_same_messages():
    torch = pytest.importorskip("torch")
    for ours_cls, theirs_cls in zip(models(tinytorch), models(torch)):
        ours, theirs = ours_cls(), theirs_cls()
        assert set(ours.state_dict()) == set(theirs.state_dict())
        theirs_state = theirs.state_dict()
        ours.load_state_dict(theirs_state)  # PyTorch's own tensors, strict
        for name, value in ours.state_dict().items():
            assert np.array_equal(value.numpy(), theirs_state[name].numpy()), name
        theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    ours, theirs = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    for bad in ({"weight": np.zeros((4, 2)), "bias": np.ones(3), "extra": np.ones(1)}, {"bias": np.ones(5)}):
        with pytest.raises(RuntimeError) as expected:
            theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
        assert raised(ours.load_state_dict, bad) == (RuntimeError, str(expected.value))


# --- nll_loss and cross_entropy: weight=, spatial axes, probabilities, shapes ---------------------------

def weighted_nll_np(logp, y, w, ignore_index, reduction):
    """The weighted negative log-likelihood in numpy: classes on axis 1, the mean over the weights."""
    keep = y != ignore_index
    safe = np.where(keep, y, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    wy = np.where(keep, w[safe], 0)
    rows = -picked * wy
    return rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.sum() / wy.sum()


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4), (2, 3, 2, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_weight_and_spatial_axes_matches_numpy_and_gradcheck(shape, reduction):
    rng = np.random.default_rng(len(shape))
    logp = log_softmax_np(rng.standard_normal(shape), 1)
    y = rng.integers(0, 3, (shape[0],) + shape[2:])
    y.reshape(-1)[1] = -1  # ignored
    w = np.array([0.5, 2.0, 1.5])
    x = t64(logp)
    got = F.nll_loss(x, Tensor.tensor(y), weight=Tensor.tensor(w), ignore_index=-1, reduction=reduction)
    assert np.allclose(got.detach().numpy(), weighted_nll_np(logp, y, w, -1, reduction))
    assert gradcheck(lambda a: F.nll_loss(a, Tensor.tensor(y), weight=Tensor.tensor(w), ignore_index=-1,
                                          reduction=reduction), (x,))
    unweighted = nn.NLLLoss(ignore_index=-1, reduction=reduction)(x, Tensor.tensor(y))
    assert np.allclose(unweighted.detach().numpy(), weighted_nll_np(logp, y, np.ones(3), -1, reduction))


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_over_spatial_axes_and_with_weight_matches_numpy(smoothing, reduction):
    rng = np.random.default_rng(7)
    z = rng.standard_normal((2, 4, 3))
    y = rng.integers(0, 4, (2, 3))
    y[1, 1] = -100
    logp = log_softmax_np(z, 1)
    flat_z, flat_y = z.transpose(0, 2, 1).reshape(-1, 4), y.reshape(-1)
    spatial = F.cross_entropy(t64(z, False), Tensor.tensor(y), label_smoothing=smoothing, reduction=reduction)
    flat = F.cross_entropy(t64(flat_z, False), Tensor.tensor(flat_y), label_smoothing=smoothing, reduction=reduction)
    assert np.allclose(spatial.numpy().reshape(-1), flat.numpy().reshape(-1))
    assert np.allclose(nn.CrossEntropyLoss(label_smoothing=smoothing, reduction=reduction)(
        t64(z, False), Tensor.tensor(y)).numpy(), spatial.numpy())
    w = np.array([1.0, 0.2, 3.0, 0.7])
    got = F.cross_entropy(t64(z), Tensor.tensor(y), weight=Tensor.tensor(w), label_smoothing=smoothing,
                          reduction=reduction)
    # PyTorch's definition: (1 - s) * weighted nll + s / C * sum_c w_c * -log p_c, with the same denominator
    keep = y != -100
    smooth = np.where(keep, -(logp * w[None, :, None]).sum(1), 0)
    if reduction != "none":
        smooth = smooth.sum() / (np.where(keep, w[np.where(keep, y, 0)], 0).sum() if reduction == "mean" else 1)
    want = (1 - smoothing) * weighted_nll_np(logp, y, w, -100, reduction) + smoothing / 4 * smooth
    assert np.allclose(got.detach().numpy(), want)
    assert gradcheck(lambda a: F.cross_entropy(a, Tensor.tensor(y), weight=Tensor.tensor(w),
                                               label_smoothing=smoothing, reduction=reduction), (t64(z),))


def test_loss_modules_take_pytorch_s_arguments_and_keep_the_weight_as_a_buffer():
    rng = np.random.default_rng(8)
    z, y, w = rng.standard_normal((4, 3, 2)), rng.integers(0, 3, (4, 2)), np.array([0.2, 1.0, 3.0])
    loss = nn.CrossEntropyLoss(Tensor.tensor(w), None, -100, None, "sum")(t64(z, False), Tensor.tensor(y))
    assert np.isclose(loss.item(), weighted_nll_np(log_softmax_np(z, 1), y, w, -100, "sum"))
    nll = nn.NLLLoss(Tensor.tensor(w), reduction="none")(t64(log_softmax_np(z, 1), False), Tensor.tensor(y))
    assert np.allclose(nll.numpy(), weighted_nll_np(log_softmax_np(z, 1), y, w, -100, "none"))
    for module in (nn.CrossEntropyLoss, nn.NLLLoss, nn.BCELoss):
        assert list(module(Tensor.tensor(w)).state_dict()) == ["weight"] and list(module().state_dict()) == []
    with pytest.raises(NotImplementedError, match="deprecated"):
        nn.CrossEntropyLoss(size_average=True)(t64(z, False), Tensor.tensor(y))


def test_cross_entropy_with_probabilities_over_spatial_axes_matches_numpy():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((2, 3, 5))
    p = rng.dirichlet(np.ones(3), size=(2, 5)).transpose(0, 2, 1)
    q = p * 0.9 + 0.1 / 3
    want = -(q * log_softmax_np(z, 1)).sum(1)
    got = F.cross_entropy(t64(z), t64(p, False), label_smoothing=0.1, reduction="none")
    assert got.shape == (2, 5) and np.allclose(got.detach().numpy(), want)
    assert np.isclose(F.cross_entropy(t64(z), t64(p, False), label_smoothing=0.1).item(), want.mean())
    assert gradcheck(lambda a: F.cross_entropy(a, t64(p, False), label_smoothing=0.1), (t64(z),))


SHAPE_CASES = [((3, 4), (2,)), ((3, 4), (1, 3)), ((2, 4, 5), (2, 3)), ((2, 4, 5), (2,)), ((2, 3, 4), (3, 4)),
               ((3, 4), (3, 5))]
SHAPE_ERRORS = [ValueError, ValueError, RuntimeError, RuntimeError, ValueError, RuntimeError]  # PyTorch 2.13's


@pytest.mark.parametrize("input_shape, target_shape, want", [(*case, kind) for case, kind in zip(SHAPE_CASES, SHAPE_ERRORS)])
def test_a_bad_target_shape_raises_pytorch_s_error(input_shape, target_shape, want):
    x = Tensor.zeros(*input_shape)
    y = np.zeros(target_shape, dtype=np.int64)
    kind, message = raised(F.cross_entropy, x, y)
    assert kind is want and str(list(target_shape)[0]) in message
    assert raised(F.nll_loss, x, y)[0] is kind
    assert raised(F.nll_loss, x, np.zeros(target_shape))[0] is kind  # the shape is checked before the dtype
    assert raised(F.nll_loss, Tensor.zeros(2, 3), np.zeros(2, dtype=np.int64), weight=np.ones(4)) == (
        RuntimeError, "weight tensor should be defined either for all 3 classes or no classes but got weight "
                      "tensor of shape: [4]")


@pytest.mark.parametrize("input_shape, target_shape", SHAPE_CASES)
def test_bad_target_shapes_raise_what_pytorch_raises(input_shape, target_shape):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as expected:
        torch.nn.functional.cross_entropy(torch.zeros(input_shape), torch.zeros(target_shape, dtype=torch.long))
    kind, message = raised(F.cross_entropy, Tensor.zeros(*input_shape), np.zeros(target_shape, dtype=np.int64))
    assert kind is type(expected.value)
    if len(input_shape) > 2 or kind is ValueError:  # 2-D logits: PyTorch's message names no shapes
        assert message == str(expected.value)


def test_losses_over_classes_match_pytorch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(11)
    z = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)
    y = rng.integers(0, 4, (3, 2, 2))
    y[0, 0, 1] = -100
    w = np.array([0.3, 1.0, 2.0, 0.5], np.float32)
    p = rng.dirichlet(np.ones(4), size=(3, 2, 2)).transpose(0, 3, 1, 2).astype(np.float32)
    for reduction in ("mean", "sum", "none"):
        for smoothing in (0.0, 0.2):
            for kwargs in ({}, {"weight": w}):
                for target in (y, p):
                    ours, theirs = Tensor.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
                    a = F.cross_entropy(ours, Tensor.tensor(target), reduction=reduction, label_smoothing=smoothing,
                                        **{k: Tensor.tensor(v) for k, v in kwargs.items()})
                    b = tf.cross_entropy(theirs, torch.tensor(target), reduction=reduction, label_smoothing=smoothing,
                                         **{k: torch.tensor(v) for k, v in kwargs.items()})
                    a.sum().backward()
                    b.sum().backward()
                    assert np.allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)
                    assert np.allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-5)
            a = F.nll_loss(Tensor.tensor(z), Tensor.tensor(y), weight=Tensor.tensor(w), reduction=reduction)
            b = tf.nll_loss(torch.tensor(z), torch.tensor(y), weight=torch.tensor(w), reduction=reduction)
            assert np.allclose(a.numpy(), b.numpy(), atol=1e-5)


# --- pad's modes ---------------------------------------------------------------------------------------

NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("mode", sorted(NUMPY_MODE))
@pytest.mark.parametrize("shape, pads", [((2, 5), (2, 3)), ((1, 3, 4), (1, 2)), ((2, 4, 3), (2, 0, 1, 2)),
                                         ((1, 2, 3, 4, 3), (1, 1, 2, 0, 2, 2))])
def test_pad_modes_match_numpy_and_gradcheck(mode, shape, pads):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape)
    widths = [(0, 0)] * (len(shape) - len(pads) // 2) + [pads[i:i + 2] for i in range(len(pads) - 2, -1, -2)]
    x = t64(a)
    assert np.array_equal(F.pad(x, pads, mode=mode).detach().numpy(), np.pad(a, widths, mode=NUMPY_MODE[mode]))
    assert gradcheck(lambda v: F.pad(v, pads, mode=mode), (x,))


@pytest.mark.parametrize("mode", sorted(NUMPY_MODE))
def test_a_negative_pad_crops_first(mode):
    row = Tensor.tensor([[0.0, 1.0, 2.0, 3.0, 4.0]])
    assert F.pad(row, (-2, -1), mode=mode).tolist() == [[2.0, 3.0]]
    want = {"reflect": [1.0, 2.0, 3.0, 4.0, 3.0, 2.0], "replicate": [1.0, 2.0, 3.0, 4.0, 4.0, 4.0],
            "circular": [1.0, 2.0, 3.0, 4.0, 1.0, 2.0]}  # circular wraps around what is left
    assert F.pad(row, (-1, 2), mode=mode).tolist() == [want[mode]]
    assert gradcheck(lambda v: F.pad(v, (-1, 2), mode=mode), (t64(row.numpy()),))


PAD_ERRORS = [((4,), (1, 1), "reflect", None), ((1, 2, 3, 4), (1, 2), "replicate", None),
              ((2, 3, 4), (4, 1), "reflect", None), ((1, 1, 3, 4), (1, 1, 3, 1), "reflect", None),
              ((2, 3, 4), (5, 0), "circular", None), ((2, 3, 4), (1, 2), "reflect", 1.0),
              ((2, 3, 4), (1,), "circular", None), ((2, 3), (1, 1), "nearest", None),
              ((2, 3, 0), (1, 1), "reflect", None)]


@pytest.mark.parametrize("shape, pads, mode, value", PAD_ERRORS)
def test_pad_errors_are_pytorch_s(shape, pads, mode, value):
    kind, message = raised(F.pad, Tensor.zeros(*shape), pads, mode=mode, value=value)
    assert kind in (RuntimeError, NotImplementedError) and message
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as expected:
        torch.nn.functional.pad(torch.zeros(shape), pads, mode=mode, value=value)
    assert (kind, message) == (type(expected.value), str(expected.value))


@pytest.mark.parametrize("mode", sorted(NUMPY_MODE))
def test_pad_modes_match_pytorch(mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    for shape, pads in (((2, 3, 5, 4), (3, -1, 2, 1)), ((2, 3, 5, 4), (1, 1, -2, 3)), ((1, 2, 3, 4, 5), (1, 2, 0, 2, 1, 1))):
        a = rng.standard_normal(shape)
        ours, theirs = t64(a), torch.tensor(a, requires_grad=True)
        expected = torch.nn.functional.pad(theirs, pads, mode=mode)
        g = rng.standard_normal(tuple(expected.shape))
        got = F.pad(ours, pads, mode=mode)
        (got * Tensor.tensor(g)).sum().backward()
        (expected * torch.tensor(g)).sum().backward()
        assert np.allclose(got.detach().numpy(), expected.detach().numpy())
        assert np.allclose(ours.grad.numpy(), theirs.grad.numpy())


# --- binary_cross_entropy, hardsigmoid, softsign ------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_numpy_and_gradcheck(reduction):
    rng = np.random.default_rng(2)
    p, y, w = rng.uniform(0.05, 0.95, (3, 4)), rng.random((3, 4)), rng.random(4)
    rows = -w * (y * np.log(p) + (1 - y) * np.log1p(-p))
    want = rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.mean()
    got = F.binary_cross_entropy(t64(p), t64(y, False), weight=Tensor.tensor(w), reduction=reduction)
    assert np.allclose(got.detach().numpy(), want)
    assert np.allclose(nn.BCELoss(weight=Tensor.tensor(w), reduction=reduction)(t64(p), t64(y)).detach().numpy(), want)
    assert gradcheck(lambda a, b: F.binary_cross_entropy(a, b, weight=Tensor.tensor(w), reduction=reduction),
                     (t64(p), t64(y)))


def test_binary_cross_entropy_clamps_the_log_at_minus_100_and_checks_its_inputs():
    p = t64([0.0, 1.0, 0.5])
    loss = F.binary_cross_entropy(p, t64([1.0, 0.0, 0.3], False), reduction="sum")
    assert np.isclose(loss.item(), 200 - 0.3 * np.log(0.5) - 0.7 * np.log(0.5))
    loss.backward()
    assert np.allclose(p.grad.numpy(), [-1e12, 1e12, 0.8])  # (p - y) / max(p (1 - p), 1e-12), as PyTorch
    assert raised(F.binary_cross_entropy, t64([1.5]), t64([1.0])) == (
        RuntimeError, "all elements of input should be between 0 and 1")
    assert raised(F.binary_cross_entropy, t64([0.5]), t64([2.0])) == (
        RuntimeError, "all elements of target should be between 0 and 1")
    kind, message = raised(F.binary_cross_entropy, t64([[0.5], [0.5]]), t64([1.0, 0.0]))
    assert kind is ValueError and message.startswith("Using a target size (torch.Size([2])) that is different")


def test_hardsigmoid_and_softsign_match_numpy_and_gradcheck():
    a = np.array([-5.0, -3.5, -1.0, 0.0, 0.7, 2.9, 3.5, 8.0])
    assert np.allclose(F.hardsigmoid(t64(a)).detach().numpy(), np.clip(a / 6 + 0.5, 0, 1))
    assert np.allclose(nn.Softsign()(t64(a)).detach().numpy(), a / (1 + np.abs(a)))
    assert gradcheck(F.hardsigmoid, (t64(a),)) and gradcheck(F.softsign, (t64(a),))
    x = t64(a)
    nn.Hardsigmoid()(x).sum().backward()
    assert np.allclose(x.grad.numpy(), np.where(np.abs(a) < 3, 1 / 6, 0))


def test_bce_and_activations_match_pytorch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(4)
    p, y, w = rng.uniform(0, 1, (5, 3)), rng.random((5, 3)), rng.random(3)
    p[0, 0], p[1, 1], y[0, 0], y[1, 1] = 0.0, 1.0, 1.0, 0.0  # the clamped logs
    for reduction in ("mean", "sum", "none"):
        ours, theirs = t64(p), torch.tensor(p, requires_grad=True)
        a = F.binary_cross_entropy(ours, t64(y, False), weight=Tensor.tensor(w), reduction=reduction)
        b = tf.binary_cross_entropy(theirs, torch.tensor(y), weight=torch.tensor(w), reduction=reduction)
        a.sum().backward()
        b.sum().backward()
        assert np.allclose(a.detach().numpy(), b.detach().numpy())
        assert np.allclose(ours.grad.numpy(), theirs.grad.numpy())
    x = rng.standard_normal(20) * 4
    for name in ("hardsigmoid", "softsign"):
        ours, theirs = t64(x), torch.tensor(x, requires_grad=True)
        a, b = getattr(F, name)(ours), getattr(tf, name)(theirs)
        a.sum().backward()
        b.sum().backward()
        assert np.allclose(a.detach().numpy(), b.detach().numpy()) and np.allclose(ours.grad.numpy(), theirs.grad.numpy())


def test_the_names_resolve_where_pytorch_keeps_them():
    from tinytorch import nn_more
    assert F.nll_loss is nn_more.nll_loss and F.cross_entropy is nn_more.cross_entropy and F.pad is nn_more.pad
    assert nn.NLLLoss is nn_more.NLLLoss and nn.BCELoss is nn_more.BCELoss
    assert F.binary_cross_entropy is nn_more.binary_cross_entropy and nn.Hardsigmoid is nn_more.Hardsigmoid
    assert F.softsign is nn_more.softsign and tinytorch.nn.Softsign is nn_more.Softsign
