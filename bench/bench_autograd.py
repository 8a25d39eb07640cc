"""Autograd overhead: a recorded op on tiny tensors, and a long chain forward + backward.

Prints times as ratios to numpy's `a + b` on the same (4, 4) arrays, measured in this process
(interleaved, best of several rounds), and PyTorch CPU's figures where torch is installed.
Targets (module 03): a recorded `a + b` costs at most what PyTorch's does; a 1,000-op chain
costs at most 7 us per op forward + backward.

    .venv/bin/python bench/bench_autograd.py
"""
import timeit

import numpy as np

from tinytorch.autograd import no_grad, tensor

ROUNDS = 7


def best_us(fn, number):
    """The best of ROUNDS timings of `number` calls, in microseconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=ROUNDS)) / number * 1e6


def chain(x, seed, steps=1000):
    y = x
    for _ in range(steps):
        y = y * 1.0001
    y.backward(seed)


def main():
    rng = np.random.default_rng(0)
    an, bn = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    a, b = tensor(an, requires_grad=True), tensor(bn, requires_grad=True)
    seed = tensor(np.ones((4, 4), dtype=np.float32))
    rows = []
    numpy_add = best_us(lambda: an + bn, 20000)
    rows.append(("numpy a + b (4, 4)", numpy_add))
    rows.append(("tinytorch a + b, requires_grad", best_us(lambda: a + b, 20000)))
    rows.append(("tinytorch a * b, requires_grad", best_us(lambda: a * b, 20000)))
    with no_grad():
        rows.append(("tinytorch a + b, no_grad", best_us(lambda: a + b, 20000)))
    rows.append(("tinytorch 1000-op chain fwd+bwd, per op", best_us(lambda: chain(a, seed), 3) / 1000))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        ta, tb = torch.tensor(an, requires_grad=True), torch.tensor(bn, requires_grad=True)
        tseed = torch.ones(4, 4)
        rows.append(("torch a + b, requires_grad", best_us(lambda: ta + tb, 20000)))
        rows.append(("torch a * b, requires_grad", best_us(lambda: ta * tb, 20000)))
        rows.append(("torch 1000-op chain fwd+bwd, per op", best_us(lambda: chain(ta, tseed), 3) / 1000))
    numpy_add = min(numpy_add, best_us(lambda: an + bn, 20000))  # again, after the others
    print(f"{'':42} {'us':>8} {'x numpy a+b':>12}")
    for name, us in rows:
        print(f"{name:42} {us:8.2f} {us / numpy_add:12.1f}")
    if torch is not None:
        ours, theirs = rows[1][1], rows[5][1]
        print(f"\nrecorded a + b: tinytorch / torch = {ours / theirs:.2f} (target <= 1)")
    print(f"chain: {rows[4][1]:.2f} us per op (target <= 7)")


if __name__ == "__main__":
    main()
