"""Module 05's package (tinytorch.training): optimizers against the published update rules (and torch
if present), the data pipeline, schedules, checkpoints, and a shortened digits milestone."""
import math
import subprocess
import sys

import numpy as np
import pytest

import tinytorch.nn as nn
from tinytorch.autograd import Tensor
from tinytorch.tensor_base import Generator
from tinytorch import data, optim
from tinytorch.training import train_digits, save_checkpoint, load_checkpoint, confusion_matrix


def param(values):
    return nn.Parameter(Tensor.tensor(np.asarray(values, dtype=np.float64)))


def run(opt_cls, grads, start, **options):
    p = param(start)
    opt = opt_cls([p], **options)
    out = []
    for g in grads:
        p.grad = Tensor.tensor(np.asarray(g, dtype=np.float64))
        opt.step()
        out.append(p.detach().numpy().copy())
    return out, opt


def test_sgd_by_hand():
    # w = 1, g = 1 each step, lr 0.1, momentum 0.9: buffers 1, 1.9, 2.71
    steps, _ = run(optim.SGD, [[1.0]] * 3, [1.0], lr=0.1, momentum=0.9)
    assert np.allclose(np.concatenate(steps), [0.9, 0.71, 0.439])
    # Nesterov: g + 0.9 * buf = 1.9, 2.71, 3.439
    steps, _ = run(optim.SGD, [[1.0]] * 3, [1.0], lr=0.1, momentum=0.9, nesterov=True)
    assert np.allclose(np.concatenate(steps), [0.81, 0.539, 0.1951])
    # weight decay 0.5 on w = 2, g = 0: w <- w - 0.1 * 0.5 * w
    steps, _ = run(optim.SGD, [[0.0]] * 2, [2.0], lr=0.1, weight_decay=0.5)
    assert np.allclose(np.concatenate(steps), [1.9, 1.805])


def test_adam_and_adamw_by_hand():
    # step 1: m = 0.1 g, v = 0.001 g^2, m_hat = g, v_hat = g^2: w -= lr * sign(g)
    steps, opt = run(optim.Adam, [[2.0], [-1.0]], [1.0], lr=0.1)
    m, v = 0.9 * 0.2 + 0.1 * -1.0, 0.999 * 0.004 + 0.001 * 1.0
    second = 0.9 - 0.1 * (m / 0.19) / (math.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    assert np.allclose(np.concatenate(steps), [0.9, second])
    assert opt.state_dict()["state"][0]["step"] == 2
    # AdamW, g = 0: only the decoupled decay moves the weight
    steps, _ = run(optim.AdamW, [[0.0]] * 2, [1.0], lr=0.1, weight_decay=0.5)
    assert np.allclose(np.concatenate(steps), [0.95, 0.9025])
    # Adam's L2 decay goes through the moments: the first step is then lr * sign(wd * w)
    steps, _ = run(optim.Adam, [[0.0]], [1.0], lr=0.1, weight_decay=0.5)
    assert np.allclose(steps[0], [0.9])


def test_optimizers_against_torch_when_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(5) for _ in range(8)]
    start = rng.standard_normal(5)
    cases = [(optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
             (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.5, dampening=0.3)),
             (optim.Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
             (optim.AdamW, torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.2))]
    for ours_cls, torch_cls, options in cases:
        ours, _ = run(ours_cls, grads, start, **options)
        p = torch.tensor(start, requires_grad=True)
        opt = torch_cls([p], **options)
        for g, mine in zip(grads, ours):
            p.grad = torch.tensor(g)
            opt.step()
            assert np.allclose(p.detach().numpy(), mine, rtol=1e-7, atol=1e-9), ours_cls.__name__


@pytest.mark.parametrize("opt_cls, options", [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.1)),
                                              (optim.AdamW, dict(lr=0.1, weight_decay=0.1))])
def test_a_0d_parameter_updates_as_a_1_element_one(opt_cls, options):
    """A scalar parameter (a learned temperature, say) is legal in PyTorch; numpy's ufuncs return
    scalars for 0-d arrays, which `out=` inside an update cannot write to."""
    grads = [0.5, -1.0, 2.0]
    scalar, _ = run(opt_cls, grads, 1.5, **options)
    vector, _ = run(opt_cls, [[g] for g in grads], [1.5], **options)
    assert [s.shape for s in scalar] == [()] * 3
    assert np.allclose(np.ravel(scalar), np.ravel(vector)) and not np.allclose(scalar[-1], 1.5)


def test_optimizer_state_dict_round_trip_and_set_to_none():
    a, b = param([1.0, 2.0]), param([3.0])
    opt = optim.AdamW([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    for p in (a, b):
        p.grad = Tensor.tensor(np.ones(p.shape))
    opt.step()
    saved = opt.state_dict()
    assert saved["param_groups"][1]["lr"] == 0.5 and saved["param_groups"][1]["params"] == [1]
    a2, b2 = param(a.detach().numpy()), param(b.detach().numpy())
    opt2 = optim.AdamW([{"params": [a2]}, {"params": [b2]}], lr=0.1)
    opt2.load_state_dict(saved)
    for o, ps in ((opt, (a, b)), (opt2, (a2, b2))):
        for p in ps:
            p.grad = Tensor.tensor(np.full(p.shape, 0.5))
        o.step()
    assert np.allclose(a.detach().numpy(), a2.detach().numpy()) and np.allclose(b.detach().numpy(), b2.detach().numpy())
    opt.zero_grad()
    assert a.grad is None
    a.grad = Tensor.tensor([1.0, 1.0])
    opt.zero_grad(set_to_none=False)
    assert a.grad.numpy().tolist() == [0.0, 0.0]


def test_schedules():
    p = param([1.0])
    opt = optim.SGD([p], lr=1.0)
    sched = optim.StepLR(opt, step_size=2, gamma=0.5)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(4):
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]
    lrs = [optim.warmup_cosine(s, 1.0, 10, 110) for s in range(111)]
    assert lrs[0] == 0.1 and lrs[9] == 1.0 and math.isclose(lrs[60], 0.5) and lrs[110] < 1e-12


def test_clip_grad_norm_global():
    ps = [param(np.zeros(3)), param(np.zeros(4))]
    ps[0].grad, ps[1].grad = Tensor.tensor([1.0, 2.0, 2.0]), Tensor.tensor([0.0, 0.0, 0.0, 4.0])
    assert math.isclose(optim.clip_grad_norm_(ps, 0.5), math.sqrt(25))
    assert math.isclose(math.sqrt(sum((p.grad.numpy() ** 2).sum() for p in ps)), 0.5, rel_tol=1e-5)


def test_dataloader():
    X, y = np.arange(22.0).reshape(11, 2), np.arange(11)
    loader = data.DataLoader(data.TensorDataset(X, y), batch_size=4, shuffle=True, generator=Generator(0))
    seen = [yb.numpy() for _, yb in loader]
    assert [len(b) for b in seen] == [4, 4, 3] and sorted(np.concatenate(seen)) == list(range(11))
    again = [yb.numpy() for _, yb in data.DataLoader(data.TensorDataset(X, y), 4, shuffle=True,
                                                     generator=Generator(0))]
    assert all(np.array_equal(u, v) for u, v in zip(seen, again))
    assert len(data.DataLoader(data.TensorDataset(X, y), 4, drop_last=True)) == 2

    class Squares(data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return Tensor.tensor([float(i)]), i * i

    (xb, yb), *_ = data.DataLoader(Squares(), batch_size=3)
    assert xb.shape == (3, 1) and yb.tolist() == [0, 1, 4]


def test_checkpoint_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = Tensor.ones(p.shape)
    opt.step()
    save_checkpoint(tmp_path / "ckpt", model, opt, epoch=3)
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other_opt = optim.Adam(other.parameters(), lr=0.1)
    assert load_checkpoint(tmp_path / "ckpt", other, other_opt) == {"epoch": 3}
    x = Tensor.randn(5, 3)
    assert np.allclose(model(x).detach().numpy(), other(x).detach().numpy())
    assert other_opt.state[next(other.parameters())]["step"] == 1


def test_confusion_matrix():
    counts = confusion_matrix([0, 1, 1, 2], [0, 1, 2, 2], 3)
    assert counts.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 1]]


def test_digits_milestone_learns_in_a_shortened_run():
    """The CI form of `./course milestone digits`: 3 epochs already put it far above chance (10%)."""
    result = train_digits(epochs=3, progress=False)
    assert result["test_accuracy"] > 0.85, result["test_accuracy"]
    assert result["history"]["train_loss"][-1] < result["history"]["train_loss"][0]


def test_optim_and_data_are_modules_of_their_own_like_torch_optim():
    import tinytorch.training as training
    assert optim.AdamW is training.AdamW and data.DataLoader is training.DataLoader
    fresh = subprocess.run([sys.executable, "-c", "import tinytorch.optim as optim, tinytorch.data as data;"
                            "print(optim.SGD.__name__, data.TensorDataset.__name__)"],
                           capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.split() == ["SGD", "TensorDataset"]
