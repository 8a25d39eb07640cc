"""Module 02 benchmark: views cost no copy, and ops on contiguous float32 stay close to numpy.

Run: .venv/bin/python bench/bench_strides.py   (prints figures; targets: views allocate no data,
elementwise ops and matmul within 1.2x of the same numpy call, measured here in one process)
"""
import timeit
import tracemalloc

import numpy as np

from tinytorch import strides as ts


def best_time(fn, number, repeat=7):
    """The best mean time per call, in seconds, over `repeat` runs of `number` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def view_allocations():
    t = ts.zeros(1000, 1000)  # 1M float32 elements, 4 MB of data
    views = {
        "transpose": lambda: t.T,
        "slice with step": lambda: t[::2, 1::3],
        "view": lambda: t.view(-1),
        "reshape (as view)": lambda: t.reshape(100, 10000),
        "expand": lambda: t[0].expand(1000, 1000),
        "unsqueeze+permute": lambda: t.unsqueeze(0).permute(2, 0, 1),
        "chunk into 4": lambda: t.chunk(4),
    }
    rows = []
    for name, make in views.items():
        make()  # warm up caches and lazily created objects
        tracemalloc.start()
        view = make()
        size, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        shared = all(v.storage is t.storage for v in (view if isinstance(view, tuple) else (view,)))
        rows.append((name, peak, shared))
    return t.numel() * 4, rows


def ratios():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1_000_000).astype(np.float32)
    y = rng.standard_normal(1_000_000).astype(np.float32)
    tx, ty = ts.tensor(x), ts.tensor(y)
    m = rng.standard_normal((1000, 1000)).astype(np.float32)
    row = rng.standard_normal(1000).astype(np.float32)
    tm, trow = ts.tensor(m), ts.tensor(row)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    ta, tb = ts.tensor(a), ts.tensor(b)
    cases = [
        ("add, 1M float32", lambda: tx + ty, lambda: np.add(x, y), 20),
        ("mul, 1M float32", lambda: tx * ty, lambda: np.multiply(x, y), 20),
        ("add broadcast (1000,1000)+(1000,)", lambda: tm + trow, lambda: np.add(m, row), 50),
        ("sum, 1M float32", lambda: tx.sum(), lambda: np.sum(x), 50),
        ("matmul 512x512 float32", lambda: ta @ tb, lambda: np.matmul(a, b), 10),
    ]
    out = []
    for name, ours, theirs, number in cases:
        for _ in range(3):
            ours(), theirs()
        t_ours = t_np = float("inf")
        for _ in range(30):  # alternate the two, so that both see the same machine load
            t_ours = min(t_ours, best_time(ours, number, repeat=1))
            t_np = min(t_np, best_time(theirs, number, repeat=1))
        out.append((name, t_ours, t_np, t_ours / t_np))
    small_a, small_b = ts.ones(4, 4), ts.ones(4, 4)
    na, nb = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
    tiny = best_time(lambda: small_a + small_b, 20000), best_time(lambda: na + nb, 20000)
    return out, tiny


if __name__ == "__main__":
    data_bytes, rows = view_allocations()
    print(f"views of a 1000x1000 float32 tensor ({data_bytes} bytes of data); bytes allocated (tracemalloc peak):")
    for name, peak, shared in rows:
        print(f"  {name:22s} {peak:8d} bytes  shares storage: {shared}")
    worst = max(peak for _, peak, _ in rows)
    print(f"  worst: {worst} bytes = {worst / data_bytes:.5f} of the data -> {'OK' if worst < data_bytes / 100 else 'FAIL'}")
    results, (tiny_ours, tiny_np) = ratios()
    print("time per call, tinytorch vs the same numpy call (best of 30 alternating runs), target ratio <= 1.2:")
    for name, ours, theirs, ratio in results:
        print(f"  {name:36s} {ours * 1e6:10.1f} us  numpy {theirs * 1e6:10.1f} us  ratio {ratio:5.3f}"
              f"  {'OK' if ratio <= 1.2 else 'SLOW'}")
    print(f"  (per-op overhead, (4,4) float32 add: {tiny_ours * 1e6:.2f} us vs numpy {tiny_np * 1e6:.2f} us)")
