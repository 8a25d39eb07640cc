"""A character-level GPT written the way PyTorch users write single-file model files: a `device` picked at
the top, positions made with `torch.arange(..., dtype=torch.long, device=device)`, GELU's tanh form
with `torch.pow`, the causal mask kept as a registered buffer, the output layer tied to the token
embedding, and checkpoints through `state_dict()` / `load_state_dict()`.

It imports only torch, torch.nn and torch.nn.functional: tests/test_pytorch_style.py runs it unmodified
on PyTorch and, with `torch` aliased to `tinytorch`, on TinyTorch.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Config:
    def __init__(self, vocab_size=29, block_size=8, n_embd=24, n_head=3, n_layer=2):
        self.vocab_size, self.block_size = vocab_size, block_size
        self.n_embd, self.n_head, self.n_layer = n_embd, n_head, n_layer


class TanhGELU(nn.Module):
    """GELU's tanh approximation, spelled out."""

    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class MaskedSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        lower = torch.tril(torch.ones(cfg.block_size, cfg.block_size))
        self.register_buffer("mask", lower.view(1, 1, cfg.block_size, cfg.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = MaskedSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), TanhGELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList([Layer(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # one matrix reads tokens in and writes them out

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for layer in self.transformer.h:
            x = layer(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def build(cfg=None):
    """A fresh model on `device`."""
    return CharGPT(cfg or Config()).to(device)


def save_and_reload(model):
    """A second model built from `model`'s state_dict (strict, as a checkpoint is loaded)."""
    copy = build(model.cfg)
    copy.load_state_dict(model.state_dict())
    return copy
