"""Training step of an MLP: TinyTorch (modules 04-05) against the same network written in numpy.

One training step = forward, cross-entropy, backward, AdamW update of every parameter. The numpy
version is written by hand (float32, the same formulas, in-place updates), so the ratio measures what
the framework costs on top of the arithmetic. Both run in this process, interleaved, best of several
rounds. Networks (batch 256): the digits milestone MLP 64-256-128-10, and a 3-layer 1024-wide MLP
1024-1024-1024-10. Target: TinyTorch at most 1.1x numpy.

The optimizer step is timed alone too: it loops over the parameters (never over elements).

glibc is asked to keep freed memory for reuse (`keep_freed_memory`, as in bench_gpt.py and the GPT
milestone): by default it returns every freed block above 128 KiB to the OS, and the page faults
that take them back cost more than the arithmetic of a step this small, by an amount that depends on
the order of allocations rather than on the framework. `--default-malloc` measures without it.

    .venv/bin/python bench/bench_training.py [--threads N] [--default-malloc]
"""
import argparse
import time

import numpy as np

from tinytorch.autograd import Tensor
from tinytorch.nn import Linear, ReLU, Sequential
from tinytorch.nn import functional as F
from tinytorch.training import AdamW, keep_freed_memory

ROUNDS, STEPS = 5, 10
LR, BETAS, EPS, DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01


def tinytorch_setup(sizes, x, y):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [Linear(a, b)] + ([ReLU()] if i < len(sizes) - 2 else [])
    model = Sequential(*layers)
    opt = AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=DECAY)
    xt, yt = Tensor._from_array(x), Tensor._from_array(y)

    def step():
        loss = F.cross_entropy(model(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    params = [p.detach().numpy().copy() for p in model.parameters()]
    return step, opt, params


def numpy_setup(params, x, y):
    """The same network by hand: params = [W1, b1, W2, b2, ...] (copies of TinyTorch's)."""
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = [0]
    n = len(y)
    rows = np.arange(n)

    def step():
        # forward
        acts, h = [x], x
        layers = len(params) // 2
        for i in range(layers):
            z = h @ params[2 * i].T
            z += params[2 * i + 1]
            h = np.maximum(z, 0) if i < layers - 1 else z
            acts.append(h)
        shifted = h - h.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss = -logp[rows, y].mean()
        # backward
        g = np.exp(logp)
        g[rows, y] -= 1
        g *= 1 / n
        grads = [None] * len(params)
        for i in reversed(range(layers)):
            grads[2 * i] = g.T @ acts[i]
            grads[2 * i + 1] = g.sum(axis=0)
            if i > 0:
                g = (g @ params[2 * i]) * (acts[i] > 0)
        # AdamW
        t[0] += 1
        for w, gr, mm, vv in zip(params, grads, m, v):
            w *= 1 - LR * DECAY
            mm *= BETAS[0]
            mm += (1 - BETAS[0]) * gr
            step = np.square(gr)
            step *= 1 - BETAS[1]
            vv *= BETAS[1]
            vv += step
            np.sqrt(vv, out=step)
            step /= np.sqrt(1 - BETAS[1] ** t[0])
            step += EPS
            np.divide(mm, step, out=step)
            step *= LR / (1 - BETAS[0] ** t[0])
            w -= step
        return float(loss)

    return step


def best_ms(fn):
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(STEPS):
            fn()
        best = min(best, (time.perf_counter() - start) / STEPS)
    return best * 1e3


def compare(name, sizes, batch=256):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    tt_step, opt, params = tinytorch_setup(sizes, x, y)
    np_step = numpy_setup(params, x, y)
    assert np.isclose(tt_step(), np_step(), rtol=1e-4), "the two networks must compute the same loss"
    tt, ref = [], []
    for _ in range(3):  # interleave, so that both see the same machine state
        tt.append(best_ms(tt_step))
        ref.append(best_ms(np_step))
    tt, ref = min(tt), min(ref)
    opt_ms = best_ms(opt.step)
    print(f"{name:34} tinytorch {tt:8.3f} ms  numpy {ref:8.3f} ms  ratio {tt / ref:5.2f}x  "
          f"(optimizer step alone {opt_ms:.3f} ms, {sum(p.size for p in params):,} weights)")
    return tt / ref


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads (default: numpy's)")
    parser.add_argument("--default-malloc", action="store_true", help="leave glibc's allocator as it is")
    args = parser.parse_args()
    if not args.default_malloc:
        keep_freed_memory()
    if args.threads:
        from threadpoolctl import threadpool_limits
        threadpool_limits(args.threads, user_api="blas")
    compare("digits MLP 64-256-128-10, batch 256", [64, 256, 128, 10])
    compare("MLP 1024-1024-1024-10, batch 256", [1024, 1024, 1024, 10])


if __name__ == "__main__":
    main()
