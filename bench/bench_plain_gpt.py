"""Training step of a GPT written in plain PyTorch style, run on TinyTorch, against the same file on PyTorch.

The model is `tests/pytorch_style/gpt.py` (one `qkv` projection, `view(...).permute(2, 0, 3, 1, 4)`
and unpacking into q, k, v, `F.scaled_dot_product_attention(is_causal=True)`, exact `F.gelu`,
`nn.LayerNorm`, `F.cross_entropy`, `optim.AdamW`), loaded unmodified with `torch` aliased to
`tinytorch`, and again on the real PyTorch. Sizes as `bench/bench_gpt.py` (vocab 100, context 64,
width 128, 4 heads, 4 layers, batch 32, AdamW lr 1e-3, betas (0.9, 0.95), decay 0.1 on matrices).
Both start from the same weights and see the same batches; the timing loop, thread settings and
loss check are bench_gpt's (`compare`): loss curves equal to 1e-5 over the steps, and the ratio
TinyTorch / PyTorch of the median step time with 1 and 2 threads, timed in this one process.

    .venv/bin/python bench/bench_plain_gpt.py [--steps 20] [--rounds 3] [--threads 1 2] [--by-op | --handovers] [--profile | --gelu]

`--by-op` prints instead where a 1-thread step goes, group by group, against PyTorch (bench_gpt's
`by_op`), and `--handovers` how a 2-thread step's hand-overs to the thread pool go (bench_gpt's
`handovers`); `--profile` runs five 1-thread TinyTorch steps under cProfile and prints where the time goes.
`--gelu` times exact GELU alone on one thread, on the MLP's activations, against PyTorch's (`gelu_gap`):
the part of the step that sets this model apart from bench_gpt's, whose tanh GELU is faster than PyTorch's.
"""
import cProfile
import math
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

import bench_gpt  # noqa: E402  (the shared harness)
from bench_gpt import BATCH, BETAS, BLOCK, DECAY, HEADS, LAYERS, LR, VOCAB, WIDTH, batches, compare, paired  # noqa: E402
from test_pytorch_style import load_model_file  # noqa: E402

import numpy as np  # noqa: E402

import tinytorch  # noqa: E402
from tinytorch.nn import _erf  # noqa: E402
from tinytorch.training import keep_freed_memory  # noqa: E402
from tinytorch_course.kit.torch_gpt import describe_blas  # noqa: E402

TOLERANCE = 1e-5


def setup(torch_module, gpt, weights=None):
    """A training step of gpt.TinyGPT at the benchmark's sizes on `torch_module` (tinytorch or torch)."""
    cfg = gpt.Config(vocab_size=VOCAB, context=BLOCK, width=WIDTH, heads=HEADS, layers=LAYERS)
    model = gpt.TinyGPT(cfg)
    if weights is not None:
        model.load_state_dict({k: torch_module.tensor(v) for k, v in weights.items()})
    opt = model.configure_optimizer(LR, DECAY, BETAS)

    def step(x, y):
        _, loss = model(torch_module.tensor(x), torch_module.tensor(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return model, step


def gelu_gap(rounds=40):
    """Print exact GELU's cost on one thread, in ms per call on the MLP's (batch, context, 4 x width)
    activations, TinyTorch against PyTorch (each pair of medians from `paired`), and what it adds to a
    step (x layers). Also the erf alone (`tinytorch.nn._erf`, given code: 15 numpy passes, the fewest
    for an erf accurate to float32 in its form); PyTorch's forward, erf included, is one pass."""
    try:
        import torch
    except ImportError:
        sys.exit("--gelu compares with PyTorch: pip install torch==2.13.0")
    a = np.random.default_rng(0).standard_normal((BATCH, BLOCK, 4 * WIDTH)).astype(np.float32)
    scaled = a / np.float32(math.sqrt(2))  # erf's argument in GELU
    ours, theirs = tinytorch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    g_ours, g_theirs = tinytorch.ones_like(ours), torch.ones_like(theirs)
    rows = (("forward", lambda: tinytorch.nn.functional.gelu(ours), lambda: torch.nn.functional.gelu(theirs)),
            ("forward + backward", lambda: tinytorch.nn.functional.gelu(ours).backward(g_ours),
             lambda: torch.nn.functional.gelu(theirs).backward(g_theirs)),
            ("the erf alone (TinyTorch)", lambda: _erf(scaled), None))
    print(f"exact GELU on {a.shape} float32, 1 thread, ms per call (medians of {rounds} alternating rounds):")
    print(f"  {'':28}{'TinyTorch':>10}{'PyTorch':>10}{f'gap x {LAYERS} layers':>20}")
    with bench_gpt.set_threads(1, torch):
        for name, mine, other in rows:
            t_mine, t_other, _, _ = paired(mine, other, rounds)
            line = f"  {name:28}{t_mine * 1e3:10.2f}"
            if t_other is not None:
                line += f"{t_other * 1e3:10.2f}{(t_mine - t_other) * LAYERS * 1e3:17.1f} ms"
            print(line)


def main():
    profile, gelu = "--profile" in sys.argv, "--gelu" in sys.argv
    for flag in ("--profile", "--gelu"):
        if flag in sys.argv:
            sys.argv.remove(flag)
    args = bench_gpt.parse_args(__doc__)
    print(describe_blas())
    keep_freed_memory()
    if gelu:
        gelu_gap()
        return
    tinytorch.manual_seed(0)
    model, tt_step = setup(tinytorch, load_model_file(on_tinytorch=True))
    data = batches(args.steps)
    if profile:
        with bench_gpt.set_threads(1):
            tt_step(*data[0])
            cProfile.runctx("for x, y in data[1:6]: tt_step(x, y)", globals(), locals(), "/tmp/plain_gpt.prof")
        pstats.Stats("/tmp/plain_gpt.prof").sort_stats("tottime").print_stats(25)
        return
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: timing TinyTorch alone")
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    th_step = setup(torch, load_model_file(on_tinytorch=False), weights)[1] if torch is not None else None
    compare(tt_step, th_step, data, args, tol=TOLERANCE, torch=torch)


if __name__ == "__main__":
    main()
