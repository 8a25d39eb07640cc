"""The milestones: `digits` (module 05's MLP on scikit-learn's bundled digits), `gpt` (module 07) and
`cnn` (module 08's CNN on the digits)."""
import os
from pathlib import Path
import runpy


def digits(root, epochs=40):
    """Run milestones/05_digits.py in `root` with the reference package; 1 if it misses 97%."""
    os.chdir(root)
    return _milestone(root, "05_digits.py")["main"](["--epochs", str(epochs)])


def cnn(root, epochs=25):
    """Run milestones/08_cnn.py in `root` with the reference package; 1 if it misses 98.5%."""
    os.chdir(root)
    return _milestone(root, "08_cnn.py")["main"](["--epochs", str(epochs)])


def _milestone(root, name):
    """The namespace of milestones/NAME.py (the learners' milestone, which the course run reuses)."""
    return runpy.run_path(str(Path(root) / "milestones" / name), run_name="milestone")


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
    for the same wall-clock budget each, with `threads` threads each (TinyTorch: numpy's BLAS and its own
    pool, `tinytorch.set_num_threads`; PyTorch: `torch.set_num_threads`); compares the final
    validation losses (target: TinyTorch within 0.1 nats/char of PyTorch) and prints samples.
    Writes artifacts/milestone-gpt.json and artifacts/milestone-gpt.png.
    """
    import json
    import numpy as np
    from threadpoolctl import threadpool_limits
    import tinytorch
    from tinytorch.tensor_base import manual_seed
    from tinytorch.transformer import GPT, get_batch, unigram_loss

    from .torch_gpt import describe_blas

    ms = _milestone(root, "07_gpt.py")  # the corpus, model, training run, sample and plot of milestone 07
    log(describe_blas())
    data = ms["corpus"](max_chars)
    tok, train, val = data
    budget = 60.0 * minutes
    config = dict(ms["CONFIG"], vocab_size=tok.vocab_size)
    manual_seed(0)
    weights = {k: v.numpy().copy() for k, v in GPT(**config).state_dict().items()}
    results, histories = {"config": config, "minutes": minutes, "threads": threads}, {}
    prompt = tok.encode("def ")
    out = Path(root) / "artifacts"
    with threadpool_limits(threads):
        if "tinytorch" in frameworks:
            pool = tinytorch.get_num_threads()
            tinytorch.set_num_threads(threads)  # its pool as well as BLAS, as PyTorch uses its threads
            try:
                run = ms["train"](out, minutes=minutes, batch=batch, lr=lr, warmup=warmup, weights=weights,
                                  eval_every=eval_every, fresh=True, data=data,
                                  log=lambda m: log("tinytorch " + m.strip()))
            finally:
                tinytorch.set_num_threads(pool)
            results["tinytorch"] = {"val_loss": run["val_loss"], "steps": run["steps"], "seconds": run["seconds"],
                                    "sample": ms["sample"](run, 400)}
            histories["tinytorch"] = run["history"]
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
                    x, y = get_batch(train, config["block_size"], batch, rng)
                    loss = probe_model(x, y)[1]
                    popt.zero_grad(); loss.backward(); popt.step()

                steps = ms["steps_for"](probe_step, budget)
                log(f"torch: about {steps} steps in {budget:.0f} s")
                tmodel, h = _train_torch(weights, config, train, val, steps, budget, lr, batch, warmup, eval_every, log)
                final = _torch_val(tmodel, val, config["block_size"], batch, 20)
                text = tok.decode(_torch_sample(tmodel, prompt, 400))
                results["torch"] = {"val_loss": final, "steps": h["step"][-1], "seconds": h["seconds"][-1], "sample": text}
                histories["torch"] = h
    status = 0
    for name in ("tinytorch", "torch"):
        if name in results:
            r = results[name]
            looks = {m.strip() or "indent": m in r["sample"] for m in ms["PYTHON_MARKERS"]}
            r["looks_like_python"] = looks
            log(f"\n{name}: validation loss {r['val_loss']:.3f} nats/char after {r['steps']} steps "
                f"({r['seconds']:.0f} s); Python markers {looks}\n--- sample ---\n{r['sample']}\n--------------")
    if "tinytorch" in results and "torch" in results:
        gap = results["tinytorch"]["val_loss"] - results["torch"]["val_loss"]
        results["gap"] = gap
        log(f"TinyTorch - PyTorch validation loss: {gap:+.3f} nats/char (target <= 0.1): "
            f"{'met' if gap <= 0.1 else 'NOT met'}")
        status = 0 if gap <= 0.1 else 1
    out.mkdir(exist_ok=True)
    (out / "milestone-gpt.json").write_text(json.dumps(results, indent=1))
    ms["plot"](histories, out / "milestone-gpt.png", unigram_loss(train, val, tok.vocab_size))
    log(f"results: {out / 'milestone-gpt.json'}, loss curves: {out / 'milestone-gpt.png'}")
    return status
