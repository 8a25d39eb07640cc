"""The milestones: `digits` (module 05's MLP on scikit-learn's bundled digits) and `gpt` (module 07)."""
import os
from pathlib import Path
import runpy
import sys


def digits(root, epochs=40):
    """Run milestones/05_digits.py in `root` with the reference package; 1 if it misses 97%."""
    os.environ["DIGITS_EPOCHS"] = str(epochs)
    os.chdir(root)
    try:
        runpy.run_path(str(Path(root) / "milestones" / "05_digits.py"), run_name="__main__")
    except AssertionError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


PYTHON_MARKERS = ("def ", "self.", "return", "\n    ")


def _corpus(max_chars):
    import numpy as np
    from tinytorch.transformer import CharTokenizer, python_corpus

    train_text, val_text = python_corpus(max_chars=max_chars)
    tok = CharTokenizer(train_text, byte_fallback=False)
    encode = lambda text: np.array([tok.stoi[c] for c in text if c in tok.stoi], dtype=np.int64)
    return tok, encode(train_text), encode(val_text)


def _steps_for(step, seconds, probe=6):
    """How many steps of `step()` fit in `seconds` (the median of a few probe steps)."""
    import time
    times = []
    for _ in range(probe):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return max(10, int(seconds / sorted(times)[len(times) // 2]))


def _train_torch(weights, config, train, val, steps, budget, lr, batch, warmup, eval_every, log):
    """The loop of `tinytorch.transformer.train_gpt`, in PyTorch (same batches, schedule, clipping)."""
    import time
    import numpy as np
    import torch
    from tinytorch.training import warmup_cosine
    from tinytorch.transformer import get_batch
    from .torch_gpt import torch_gpt, torch_optimizer

    model = torch_gpt(config, weights)
    opt = torch_optimizer(model, lr)
    rng = np.random.default_rng(0)
    history = {"step": [], "loss": [], "val_step": [], "val_loss": [], "seconds": []}
    began, step = time.perf_counter(), 0
    while step < steps:
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step, lr, warmup, steps, lr / 10)
        x, y = get_batch(train, config["block_size"], batch, rng)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seconds = time.perf_counter() - began
        history["step"].append(step); history["loss"].append(loss.item()); history["seconds"].append(seconds)
        done = seconds >= budget
        if step % eval_every == 0 or step == steps or done:
            history["val_step"].append(step)
            history["val_loss"].append(_torch_val(model, val, config["block_size"], batch, 4))
            log(f"  torch step {step}: train {history['loss'][-1]:.3f}, val {history['val_loss'][-1]:.3f}, {seconds:.0f} s")
        if done:
            break
    return model, history


def _torch_val(model, data, block, batch, batches, seed=1234):
    import numpy as np
    import torch
    from tinytorch.transformer import get_batch
    rng, total = np.random.default_rng(seed), 0.0
    with torch.no_grad():
        for _ in range(batches):
            x, y = get_batch(data, block, batch, rng)
            total += model(x, y)[1].item()
    return total / batches


def _torch_sample(model, prompt, n, seed=0):
    import numpy as np
    import torch
    from tinytorch.transformer import sample, sampling_probs
    rng, idx = np.random.default_rng(seed), np.array([prompt], dtype=np.int64)
    with torch.no_grad():
        for _ in range(n):
            logits = model(idx[:, -model.block_size:])[:, -1].numpy()
            idx = np.concatenate([idx, sample(sampling_probs(logits, 0.8, 20), rng)[:, None]], axis=1)
    return idx[0]


def gpt(root, minutes=10.0, frameworks=("tinytorch", "torch"), threads=2, max_chars=None, batch=32,
        lr=3e-3, warmup=100, eval_every=250, log=print):
    """Module 07's milestone: the default GPT trained for `minutes` on Python's standard library.

    Trains with TinyTorch and (if installed) PyTorch, from the same initial weights, on the same batches,
    for the same wall-clock budget each, with `threads` BLAS/PyTorch threads; compares the final
    validation losses (target: TinyTorch within 0.1 nats/char of PyTorch) and prints samples.
    Writes artifacts/milestone-gpt.json and artifacts/milestone-gpt.png.
    """
    import json
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from threadpoolctl import threadpool_limits
    from tinytorch.tensor import Generator, manual_seed
    from tinytorch.training import keep_freed_memory
    from tinytorch.transformer import (GPT, estimate_loss, generate, get_batch, make_optimizer, train_gpt,
                                       unigram_loss)

    from .torch_gpt import describe_blas

    keep_freed_memory()
    log(describe_blas())
    tok, train, val = _corpus(max_chars)
    budget = 60.0 * minutes
    config = dict(vocab_size=tok.vocab_size, block_size=128, n_layer=4, n_head=4, n_embd=128, dropout=0.0)
    log(f"corpus: {len(train):,} training / {len(val):,} validation characters, vocabulary {tok.vocab_size}; "
        f"unigram baseline {unigram_loss(train, val, tok.vocab_size):.3f} nats/char")
    manual_seed(0)
    weights = {k: v.numpy().copy() for k, v in GPT(**config).state_dict().items()}
    results, histories = {"config": config, "minutes": minutes, "threads": threads}, {}
    prompt = tok.encode("def ")
    with threadpool_limits(threads):
        if "tinytorch" in frameworks:
            model = GPT(**config)
            probe = GPT(**config)
            opt = make_optimizer(probe, lr)
            rng = np.random.default_rng(99)

            def probe_step():
                x, y = get_batch(train, 128, batch, rng)
                loss = probe(x, targets=y)[1]
                opt.zero_grad(); loss.backward(); opt.step()

            steps = _steps_for(probe_step, budget)
            model.load_state_dict(weights)
            log(f"tinytorch: about {steps} steps in {budget:.0f} s")
            (Path(root) / "artifacts").mkdir(exist_ok=True)
            h = train_gpt(model, train, val, steps, batch_size=batch, lr=lr, warmup=warmup, eval_every=eval_every,
                          time_budget=budget, checkpoint=Path(root) / "artifacts" / "milestone-gpt.ckpt",
                          log=lambda m: log("  tinytorch " + m) if m.startswith("step") else None)
            final = estimate_loss(model, val, 128, batch, batches=20)
            text = tok.decode(generate(model, [prompt], 400, temperature=0.8, top_k=20, generator=Generator(0))[0])
            results["tinytorch"] = {"val_loss": final, "steps": h["step"][-1], "seconds": h["seconds"][-1], "sample": text}
            histories["tinytorch"] = h
        if "torch" in frameworks:
            try:
                import torch
            except ImportError:
                log("PyTorch is not installed: no comparison (pip install torch==2.13.0)")
                torch = None
            if torch is not None:
                torch.set_num_threads(threads)
                torch.manual_seed(0)
                from .torch_gpt import torch_gpt, torch_optimizer
                probe_model = torch_gpt(config, weights)
                popt = torch_optimizer(probe_model, lr)
                rng = np.random.default_rng(99)

                def probe_step():
                    x, y = get_batch(train, 128, batch, rng)
                    loss = probe_model(x, y)[1]
                    popt.zero_grad(); loss.backward(); popt.step()

                steps = _steps_for(probe_step, budget)
                log(f"torch: about {steps} steps in {budget:.0f} s")
                tmodel, h = _train_torch(weights, config, train, val, steps, budget, lr, batch, warmup, eval_every, log)
                final = _torch_val(tmodel, val, 128, batch, 20)
                text = tok.decode(_torch_sample(tmodel, prompt, 400))
                results["torch"] = {"val_loss": final, "steps": h["step"][-1], "seconds": h["seconds"][-1], "sample": text}
                histories["torch"] = h
    status = 0
    for name in ("tinytorch", "torch"):
        if name in results:
            r = results[name]
            looks = {m.strip() or "indent": m in r["sample"] for m in PYTHON_MARKERS}
            r["looks_like_python"] = looks
            log(f"\n{name}: validation loss {r['val_loss']:.3f} nats/char after {r['steps']} steps "
                f"({r['seconds']:.0f} s); Python markers {looks}\n--- sample ---\n{r['sample']}\n--------------")
    if "tinytorch" in results and "torch" in results:
        gap = results["tinytorch"]["val_loss"] - results["torch"]["val_loss"]
        results["gap"] = gap
        log(f"TinyTorch - PyTorch validation loss: {gap:+.3f} nats/char (target <= 0.1): "
            f"{'met' if gap <= 0.1 else 'NOT met'}")
        status = 0 if gap <= 0.1 else 1
    out = Path(root) / "artifacts"
    out.mkdir(exist_ok=True)
    (out / "milestone-gpt.json").write_text(json.dumps(results, indent=1))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, h in histories.items():
        ax.plot(h["seconds"], h["loss"], alpha=0.4, label=f"{name} train")
        ax.plot([h["seconds"][s - 1] for s in h["val_step"]], h["val_loss"], "o-", label=f"{name} validation")
    ax.set_xlabel("seconds"); ax.set_ylabel("loss (nats/char)"); ax.legend()
    fig.savefig(out / "milestone-gpt.png", dpi=100)
    log(f"results: {out / 'milestone-gpt.json'}, loss curves: {out / 'milestone-gpt.png'}")
    return status
