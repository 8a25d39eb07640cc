"""Training step of the GPT of module 07: TinyTorch against PyTorch eager on the CPU.

Model: vocab 100, context 64, width 128, 4 heads, 4 layers, MLP 4x, batch 32, AdamW (decay on the
2-D weights but the position table), no dropout, float32. Both frameworks start from the same weights
and see the same batches; the script prints the largest difference of their loss curves and the
ratio TinyTorch / PyTorch of the step time, with 1 and with 2 threads (BLAS threads for numpy,
`torch.set_num_threads` for PyTorch), in this one process: the two frameworks step alternately
(`--steps` x `--rounds` timed steps each, each after an untimed one: see `paired`) and the ratio is
the median of the per-step ratios, with its quartiles (this machine's speed drifts within seconds;
alternating cancels most of it).
Targets: at most 1.0x with 1 thread, 1.15x with 2; loss curves equal to 1e-3.
`--by-op` prints instead where a 1-thread step goes: TinyTorch's time in its Functions (matrix products,
attention, GELU, LayerNorm, cross-entropy) against PyTorch's self time in the matching ops
(torch.profiler), in ms per step. `--handovers` prints instead how a 2-thread step's hand-overs of
chunks to TinyTorch's thread pool go: how many a step, how long the pool's sleeping thread takes to
start its chunk, and how long the calling thread then waits for it (`handovers`).

    .venv/bin/python bench/bench_gpt.py [--steps 20] [--rounds 3] [--threads 1 2] [--by-op | --handovers]

PyTorch is optional (`pip install torch==2.13.0`); without it the script times TinyTorch alone.
The script first prints which OpenBLAS kernel numpy runs: where OPENBLAS_CORETYPE forces an older
kernel than the CPU's own (PyTorch ignores that variable), it says so and how to compare like with like.
"""
import argparse
import collections
import contextlib
import itertools
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from tinytorch.tensor_base import manual_seed
from tinytorch.training import keep_freed_memory
from tinytorch.transformer import GPT, make_optimizer
from tinytorch_course.kit.torch_gpt import describe_blas, torch_gpt, torch_optimizer

VOCAB, BLOCK, WIDTH, HEADS, LAYERS, BATCH = 100, 64, 128, 4, 4, 32
LR, BETAS, DECAY = 1e-3, (0.9, 0.95), 0.1


def batches(n, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, VOCAB, size=200_000)
    out = []
    for _ in range(n):
        s = rng.integers(0, len(data) - BLOCK - 1, size=BATCH)
        out.append((np.stack([data[i:i + BLOCK] for i in s]), np.stack([data[i + 1:i + BLOCK + 1] for i in s])))
    return out


def tinytorch_setup():
    keep_freed_memory()
    manual_seed(0)
    model = GPT(VOCAB, BLOCK, LAYERS, HEADS, WIDTH)
    opt = make_optimizer(model, LR, DECAY, BETAS)

    def step(x, y):
        _, loss = model(x, targets=y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return model, step


def torch_setup(weights):
    config = dict(vocab_size=VOCAB, block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH)
    model = torch_gpt(config, weights)
    opt = torch_optimizer(model, LR, DECAY, BETAS)

    def step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return step


def timed(step, data):
    times, losses = [], []
    for x, y in data:
        t = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t)
    return times, losses


def parse_args(doc, steps=20):
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--by-op", action="store_true", help="where a 1-thread step goes, op by op")
    parser.add_argument("--handovers", action="store_true", help="how a 2-thread step's hand-overs to the pool go")
    return parser.parse_args()


def set_threads(n, torch=None):
    """n threads for TinyTorch (BLAS and its own pool, through tinytorch.set_num_threads where it exists)
    and for PyTorch; a context manager that restores numpy's BLAS threads."""
    import tinytorch
    if hasattr(tinytorch, "set_num_threads"):
        tinytorch.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)
    return threadpool_limits(n)


def paired(ours, theirs, rounds):
    """Time the argument-less callables `ours` and `theirs` alternately, `rounds` times each.
    Alternating makes both see the same machine state, which on a shared machine drifts within
    seconds. Each timed call comes right after an untimed call of the same callable: a framework's
    idle threads keep spinning for a while after its work (PyTorch's OpenMP threads for about 300,000
    spins, several milliseconds here), and a call timed right after the other framework's lost a core
    to them (TinyTorch's 2-thread conv layer read 28-30 ms alternating against 22 alone, while PyTorch's
    read 13.5 either way). Returns our and their median times (seconds), the median of the per-pair
    ratios ours / theirs and its quartiles; `theirs` may be None (then only our median is not None)."""
    def timed_call(fn):
        fn()  # untimed: the other framework's threads settle meanwhile
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started

    mine, other = [], []
    for _ in range(rounds):
        mine.append(timed_call(ours))
        if theirs is not None:
            other.append(timed_call(theirs))
    if theirs is None:
        return statistics.median(mine), None, None, None
    ratios = [a / b for a, b in zip(mine, other)]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return statistics.median(mine), statistics.median(other), statistics.median(ratios), (q1, q3)


# groups of a step's work: TinyTorch's Functions, and PyTorch's ops that do the same
OP_GROUPS = (
    ("matrix products", ("LinearFunction", "MatMul"), ("aten::mm", "aten::addmm", "aten::bmm")),
    ("attention", ("AttentionFunction",), ("aten::_scaled_dot_product_flash_attention_for_cpu",
                                           "aten::_scaled_dot_product_flash_attention_for_cpu_backward")),
    ("GELU", ("GELUFunction",), ("aten::gelu", "aten::gelu_backward")),
    ("LayerNorm", ("LayerNormFunction",), ("aten::native_layer_norm", "aten::native_layer_norm_backward")),
    ("cross-entropy", ("CrossEntropyFunction",), ("aten::_log_softmax", "aten::_log_softmax_backward_data",
                                                  "aten::nll_loss_forward", "aten::nll_loss_backward")),
)


@contextlib.contextmanager
def function_times():
    """Inside, time every TinyTorch Function's forward and backward; yields {class name: seconds}. The
    time is each call's own: a Function that runs another (split_rows's wrappers) is not charged twice."""
    from tinytorch.autograd import Function
    times, open_calls, patched = collections.Counter(), [], []

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    def clocked(name, method):
        def call(*args):
            open_calls.append(0.0)  # the time of the calls this one makes
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                spent = time.perf_counter() - started
                times[name] += spent - open_calls.pop()
                if open_calls:
                    open_calls[-1] += spent
        return staticmethod(call)

    for cls in set(subclasses(Function)):
        for name in ("forward", "backward"):
            if isinstance(cls.__dict__.get(name), staticmethod):
                patched.append((cls, name, cls.__dict__[name]))
                setattr(cls, name, clocked(cls.__name__, cls.__dict__[name].__func__))
    try:
        yield times
    finally:
        for cls, name, original in patched:
            setattr(cls, name, original)


@contextlib.contextmanager
def handover_times():
    """Inside, time every hand-over of chunks to TinyTorch's thread pool (`tinytorch.parallel`); yields a
    list of (the pool's start delay, the calling thread's wait, the part of that wait after the pool
    finished), in seconds, one per hand-over."""
    from tinytorch import parallel
    original, records = parallel._run_chunks, []

    def stamped(call, stamps):
        def run():
            stamps.append(time.perf_counter())
            try:
                return call()
            finally:
                stamps.append(time.perf_counter())
        return run

    def run_chunks(calls, *rest):
        if len(calls) == 1:
            return original(calls, *rest)
        here, pool = [], []
        handed = time.perf_counter()
        result = original([stamped(calls[0], here)] + [stamped(call, pool) for call in calls[1:]], *rest)
        back = time.perf_counter()
        records.append((min(pool[0::2]) - handed, back - here[1], back - max(here[1], *pool[1::2])))
        return result

    parallel._run_chunks = run_chunks
    try:
        yield records
    finally:
        parallel._run_chunks = original


def handovers(tt_step, data, threads=2):
    """Print how a `threads`-thread step's hand-overs to the pool go: how many a step, how long after a
    hand-over the pool's thread starts (it sleeps between chunks and must be woken), and how long the
    calling thread then waits for it at the end, and how much of that wait comes after the pool has
    finished (the calling thread's own wake-up)."""
    with set_threads(threads):
        tt_step(*data[-1])
        with handover_times() as records:
            timed(tt_step, data)
    if not records:
        print(f"{threads} thread(s): no hand-overs to the pool")
        return
    delay, wait, wake = ([1e6 * r[i] for r in records] for i in range(3))
    per_step = len(records) / len(data)
    print(f"{threads} thread(s), over {len(data)} steps: {per_step:.0f} hand-overs to the pool a step.")
    for what, values in (("the pool's thread starts its chunk", delay), ("the calling thread then waits", wait),
                         ("of that wait, after the pool finished", [w for w in wake if w > 0])):
        q1, median, q3 = statistics.quantiles(values, n=4)
        print(f"  {what:38} median {median:6.1f} us, quartiles {q1:6.1f}-{q3:6.1f}; "
              f"{sum(values) / len(data) / 1e3:5.2f} ms a step")


def by_op(tt_step, th_step, data, torch=None):
    """Print where a 1-thread step goes, in ms per step (means over `data`, after an untimed step):
    TinyTorch's time in each group of Functions and PyTorch's self time in the group's ops
    (torch.profiler), each measured with its instrument on; "everything else" is the step less the groups."""
    with set_threads(1, torch):
        tt_step(*data[-1])
        with function_times() as times:
            steps, _ = timed(tt_step, data)
        columns = [[sum(times[f] for f in functions) / len(data) for _, functions, _ in OP_GROUPS] + [
            statistics.mean(steps)]]
        if th_step is not None:
            th_step(*data[-1])
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
                steps, _ = timed(th_step, data)
            self_us = collections.Counter({e.key: e.self_cpu_time_total for e in profile.key_averages()})
            columns.append([sum(self_us[op] for op in ops) / 1e6 / len(data) for _, _, ops in OP_GROUPS] + [
                statistics.mean(steps)])
    names = [name for name, _, _ in OP_GROUPS] + ["everything else", "the step"]
    for column in columns:
        column.insert(-1, column[-1] - sum(column[:-1]))
    print(f"where a 1-thread step goes, ms per step over {len(data)} steps (each framework under its profiler):")
    print(f"  {'':18}{'TinyTorch':>10}" + (f"{'PyTorch':>10}{'ratio':>8}" if len(columns) > 1 else ""))
    for i, name in enumerate(names):
        line = f"  {name:18}{columns[0][i] * 1e3:10.1f}"
        if len(columns) > 1:
            line += f"{columns[1][i] * 1e3:10.1f}"
            if i < len(OP_GROUPS) and columns[1][i] > 0:  # the profiler's own cost lands in the last two rows
                line += f"{columns[0][i] / columns[1][i]:7.2f}x"
        print(line)


def compare(tt_step, th_step, data, args, tol=1e-3, torch=None):
    """The harness of every GPT benchmark: loss curves of both steps from the same weights (1 thread),
    then the step times of both, alternating step by step (`paired`), per thread count. Returns the
    ratios TinyTorch / PyTorch (medians of the per-step ratios). With `--by-op` or `--handovers`, prints
    instead where a step goes (`by_op`) or how its hand-overs to the pool go (`handovers`) and returns {}."""
    if args.by_op:
        by_op(tt_step, th_step, data, torch)
        return {}
    if args.handovers:
        handovers(tt_step, data)
        return {}
    if th_step is not None:
        with set_threads(1, torch):
            _, a = timed(tt_step, data)
            _, b = timed(th_step, data)
        diff = max(abs(p - q) for p, q in zip(a, b))
        print(f"loss curves over {len(data)} steps from the same weights: first {a[0]:.4f} / {b[0]:.4f}, "
              f"last {a[-1]:.4f} / {b[-1]:.4f}, largest difference {diff:.2e} "
              f"({'ok' if diff <= tol else 'MISMATCH'}, target {tol:g})")
    ratios = {}
    for n in args.threads:
        our_batches, their_batches = itertools.cycle(data), itertools.cycle(data)  # the same, in order
        theirs = None if th_step is None else lambda: th_step(*next(their_batches))
        with set_threads(n, torch):
            mine, other, ratio, quartiles = paired(lambda: tt_step(*next(our_batches)), theirs,
                                                   len(data) * args.rounds)
        line = f"{n} thread(s): TinyTorch {mine * 1e3:.1f} ms/step"
        if th_step is not None:
            ratios[n] = ratio
            target = 1.0 if n == 1 else 1.15
            line += (f", PyTorch {other * 1e3:.1f} ms/step, ratio {ratio:.2f}x (quartiles {quartiles[0]:.2f}-"
                     f"{quartiles[1]:.2f}; target <= {target}x: {'met' if ratio <= target else 'NOT met'})")
        print(line, flush=True)
    return ratios


def main():
    args = parse_args(__doc__)
    print(describe_blas())
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: timing TinyTorch alone")
    data = batches(args.steps)
    model, tt_step = tinytorch_setup()
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    th_step = torch_setup(weights) if torch is not None else None
    compare(tt_step, th_step, data, args, torch=torch)


if __name__ == "__main__":
    main()
