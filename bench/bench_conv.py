"""Module 08's convolution, measured: naive loops vs the strided im2col (one copy, one GEMM) vs PyTorch.

The issue's layer: conv2d forward + backward of a (32, 16, 28, 28) float32 input with 32 filters of
3 x 3 (padding 1), and one training step of milestone 08's CNN (batch 64), TinyTorch against PyTorch
on the same number of threads (1 and 2). Also checks that the window view allocates nothing, and
times on one thread, against PyTorch's whole layer, two floors: the layer's three matrix products
alone, and those products with the im2col copy and the col2im that any im2col adds (`floor_steps`). No
im2col on numpy's BLAS can be faster than them on the machine at hand. (On two threads the layer runs
its products in two chunks of images, one BLAS thread each, so the whole products on BLAS's two
threads would not be its floor.)
The "loops" variant loops over output positions and kernel taps in Python (numpy does each step over
batch and channels); the fully scalar definition would take minutes. Ratios are measured in one
process, TinyTorch and PyTorch called alternately (`--rounds` timed calls each, each after an untimed
one): the median of the per-call ratios, with its quartiles (bench_gpt's `paired`).

glibc is asked to keep freed memory for reuse (`keep_freed_memory`, as the CNN and GPT milestones and
bench_gpt.py do): by default it hands every freed block above 128 KiB back to the OS, and each step
then page-faults its im2col matrices (megabytes) back in. `--default-malloc` measures without it.

OpenBLAS's idle threads are told to sleep at once (`OPENBLAS_THREAD_TIMEOUT=4`, unless set): by
default they spin for about 0.1 s after each threaded product, and on two cores they then took one of
the cores PyTorch's next step needed (its 2-thread CNN step measured 25-29 ms instead of 13). It also
hides what that spinning does to TinyTorch's own chunks after a product left whole: time a 2-thread
TinyTorch step in a process of its own for that (module 08, Part 7).

    .venv/bin/python bench/bench_conv.py [--rounds 30] [--default-malloc]
"""
import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # read when numpy loads OpenBLAS: before the imports

import argparse
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from tinytorch.autograd import Tensor
from tinytorch.conv import _images_last, _pad_images_last, _windows, conv2d, conv2d_backward, unfold_view
from tinytorch.training import keep_freed_memory
from bench_gpt import paired, set_threads  # alternate timing; tinytorch's threads, BLAS's and PyTorch's

ROOT = Path(__file__).resolve().parent.parent


def loops_forward_backward(x, w, g):
    """conv2d (padding 1) forward and both gradients, one output position and tap at a time."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, o, h, wd), np.float32)
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for i in range(h):
        for j in range(wd):
            for p in range(kh):
                for q in range(kw):
                    patch = xp[:, :, i + p, j + q]                       # (N, C)
                    out[:, :, i, j] += patch @ w[:, :, p, q].T
                    gw[:, :, p, q] += g[:, :, i, j].T @ patch
                    gxp[:, :, i + p, j + q] += g[:, :, i, j] @ w[:, :, p, q]
    return out, gxp[:, :, 1:-1, 1:-1], gw


def floor_steps(x, w, g):
    """Two floors for the layer's time on numpy's BLAS, as module 08 lays the work out: (1) its three
    matrix products alone (the forward W @ cols, the weight gradient cols @ G.T, the input gradient's
    columns W.T @ G); (2) those products with the two copies that any im2col adds to them: the im2col
    copy of the window view into `cols`, and the col2im that adds the input gradient's columns back
    into overlapping windows (module 08's `conv2d_backward`, which also runs the last two products)."""
    o, c, kh, kw = w.shape
    padded = _pad_images_last(x, (1, 1, 1, 1))
    view = _windows(padded, (kh, kw), (1, 1), (1, 1)).transpose(1, 4, 5, 2, 3, 0)  # (C, KH, KW, OH, OW, N)
    cols = view.reshape(c * kh * kw, -1)
    g_images_last = _images_last(g)
    w2, gmat = w.reshape(o, -1), g_images_last.transpose(1, 2, 3, 0).reshape(o, -1)
    ctx = SimpleNamespace(saved_tensors=(Tensor.tensor(x), Tensor.tensor(w)), needs_input_grad=(True, True, False),
                          cols=cols, padded_shape=padded.shape, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1))

    def products():
        w2 @ cols
        cols @ gmat.T
        w2.T @ gmat

    def with_copies():
        view.reshape(c * kh * kw, -1)  # the im2col copy
        w2 @ cols
        conv2d_backward(ctx, g_images_last)
    return products, with_copies


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--default-malloc", action="store_true", help="leave glibc's allocator as it is")
    args = parser.parse_args()
    if not args.default_malloc:
        keep_freed_memory()
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: its columns are skipped")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16, 28, 28)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((32, 32, 28, 28)).astype(np.float32)
    tx, tw = Tensor.tensor(x, requires_grad=True), Tensor.tensor(w, requires_grad=True)

    view = unfold_view(tx, 3)
    print(f"window view of the (32, 16, 28, 28) input: shape {view.shape}, shares the input's storage: "
          f"{view.storage is tx.storage}")

    def ours():
        tx.grad = tw.grad = None
        conv2d(tx, tw, None, 1, 1).backward(Tensor._from_array(g))

    ref = loops_forward_backward(x, w, g)
    ours()
    assert np.allclose(ref[1], tx.grad.numpy(), atol=1e-3) and np.allclose(ref[2], tw.grad.numpy(), rtol=1e-3, atol=1e-2)

    milestone = runpy.run_path(str(ROOT / "milestones" / "08_cnn.py"), run_name="bench")
    import tinytorch.nn.functional as F
    from tinytorch.training import SGD
    model = milestone["make_model"](32)
    optimizer = SGD(model.parameters(), lr=0.01)
    xb = Tensor._from_array(rng.standard_normal((64, 1, 8, 8)).astype(np.float32))
    yb = Tensor._from_array(rng.integers(0, 10, 64))

    def our_step():
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    if torch is not None:
        tX, tW, tG = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True), torch.tensor(g)

        def theirs():
            tX.grad = tW.grad = None
            torch.nn.functional.conv2d(tX, tW, None, 1, 1).backward(tG)

        nn = torch.nn
        tmodel = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                               nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Flatten(), nn.Dropout(0.2), nn.Linear(256, 10))
        toptimizer = torch.optim.SGD(tmodel.parameters(), lr=0.01)
        txb, tyb = torch.tensor(xb.numpy()), torch.tensor(yb.numpy())

        def their_step():
            loss = nn.functional.cross_entropy(tmodel(txb), tyb)
            toptimizer.zero_grad()
            loss.backward()
            toptimizer.step()

    products, with_copies = floor_steps(x, w, g)
    loops = paired(lambda: loops_forward_backward(x, w, g), None, 1)[0]
    print(f"conv2d forward + backward, (32, 16, 28, 28) input, 32 filters 3 x 3, padding 1:")
    print(f"  loops over positions and taps: {1e3 * loops:.0f} ms")
    for threads in (1, 2):
        with set_threads(threads, torch):
            mine, them, ratio, quartiles = paired(ours, theirs if torch else None, args.rounds)
            if threads == 1:
                floor, _, floor_ratio, _ = paired(products, theirs if torch else None, args.rounds)
                floor2, _, floor2_ratio, _ = paired(with_copies, theirs if torch else None, args.rounds)
            mine_step, them_step, step_ratio, step_quartiles = paired(our_step, their_step if torch else None,
                                                                      args.rounds)
        line = f"  {threads} thread(s): im2col {1e3 * mine:.1f} ms ({loops / mine:.0f}x faster than the loops)"
        step = f"  {threads} thread(s): milestone CNN training step (batch 64) {1e3 * mine_step:.1f} ms"
        if torch is not None:
            line += (f", PyTorch {1e3 * them:.1f} ms: TinyTorch / PyTorch {ratio:.2f}x (quartiles "
                     f"{quartiles[0]:.2f}-{quartiles[1]:.2f}; target 1.5x)")
            step += (f", PyTorch {1e3 * them_step:.1f} ms: {step_ratio:.2f}x (quartiles {step_quartiles[0]:.2f}-"
                     f"{step_quartiles[1]:.2f}; target 1.5x)")
        print(line)
        if threads == 1:
            floor_line = (f"  1 thread: its three matrix products alone {1e3 * floor:.1f} ms; with the im2col copy "
                          f"and the col2im {1e3 * floor2:.1f} ms")
            if torch is not None:
                floor_line += (f": {floor_ratio:.2f}x and {floor2_ratio:.2f}x PyTorch's whole layer, the floors of "
                               "im2col on numpy's BLAS here")
            print(floor_line)
        print(step)


if __name__ == "__main__":
    main()
