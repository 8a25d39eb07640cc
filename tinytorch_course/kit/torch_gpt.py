"""The GPT of module 07 written in PyTorch (an optional oracle for the benchmark and the milestone).

Same architecture, parameter names, initial weights (copied from a TinyTorch model), optimizer groups,
schedule and batches as `tinytorch.transformer`, so that the two differ only in the framework.
"""
import os

import numpy as np


def torch_gpt(config, weights):
    """A PyTorch model equal to `tinytorch.transformer.GPT(**config)` with `weights` (name -> array)."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF

    C, H, V = config["n_embd"], config["n_head"], config["vocab_size"]

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(C), tnn.LayerNorm(C)
            self.attn = tnn.Module()
            self.attn.qkv, self.attn.proj = tnn.Linear(C, 3 * C), tnn.Linear(C, C)
            self.fc, self.fc_out = tnn.Linear(C, 4 * C), tnn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.attn.qkv(self.ln1(x)).view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
            a = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn.proj(a.transpose(1, 2).reshape(B, T, C))
            return x + self.fc_out(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.block_size = config["block_size"]
            self.tok, self.pos = tnn.Embedding(V, C), tnn.Embedding(config["block_size"], C)
            self.blocks = tnn.ModuleList([Block() for _ in range(config["n_layer"])])
            self.ln_f = tnn.LayerNorm(C)

        def forward(self, idx, targets=None):
            idx = torch.as_tensor(idx)
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            logits = TF.linear(self.ln_f(x), self.tok.weight)
            if targets is None:
                return logits
            return logits, TF.cross_entropy(logits.view(-1, V), torch.as_tensor(targets).view(-1))

    model = Model()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(weights[name])))
    return model


def torch_optimizer(model, lr, weight_decay=0.1, betas=(0.9, 0.95)):
    """AdamW with the groups of `tinytorch.transformer.make_optimizer`."""
    import torch
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and not n.startswith("pos.")]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and not n.startswith("pos."))]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=betas, eps=1e-8)


def describe_blas():
    """numpy's BLAS and its kernel, for comparisons with PyTorch; warns if the environment forces the kernel."""
    from threadpoolctl import threadpool_info

    blas = next((p for p in threadpool_info() if p["user_api"] == "blas"), None)
    if blas is None:
        return "numpy's BLAS: not found by threadpoolctl"
    line = f"numpy's BLAS: {blas['internal_api']} {blas['version']}, kernel {blas.get('architecture')}"
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:
        line += (f"\n  OPENBLAS_CORETYPE={forced} is set: numpy runs that kernel, not the one OpenBLAS would "
                 "pick for this CPU, and PyTorch is unaffected. To compare like with like, run the command "
                 "under `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`.")
    return line
