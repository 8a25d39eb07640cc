"""A small decoder-only transformer written for PyTorch, the way single-file GPT model files are.

It imports only torch, torch.nn and torch.nn.functional: tests/test_pytorch_style.py runs it unmodified
on PyTorch and, with `torch` aliased to `tinytorch`, on TinyTorch.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 32
    context: int = 16
    width: int = 32
    heads: int = 4
    layers: int = 2
    dropout: float = 0.0


class SelfAttention(nn.Module):
    """Causal multi-head self-attention: one projection makes queries, keys and values of every head."""

    def __init__(self, cfg):
        super().__init__()
        if cfg.width % cfg.heads:
            raise ValueError(f"width {cfg.width} must be a multiple of heads {cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.out = nn.Linear(cfg.width, cfg.width)
        self.p = cfg.dropout
        self.out_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        b, t, c = x.size()
        d = c // self.heads
        # (b, t, 3c) -> (3, b, heads, t, d): one view, one permute, then three slices
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.out_dropout(self.out(y))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.ff = FeedForward(cfg)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.width)
        self.positions = nn.Embedding(cfg.context, cfg.width)
        self.register_buffer("position_ids", torch.arange(cfg.context), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.layers)])
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        self.apply(self._init)
        for name, p in self.named_parameters():  # residual projections start smaller, GPT-2 style
            if name.endswith("out.weight") or name.endswith("down.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.layers))

    @staticmethod
    def _init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None):
        b, t = idx.size()
        if t > self.cfg.context:
            raise ValueError(f"sequence of {t} tokens, the context is {self.cfg.context}")
        x = self.drop(self.tokens(idx) + self.positions(self.position_ids[:t]))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizer(self, lr, weight_decay, betas=(0.9, 0.95)):
        """AdamW, with weight decay on the matrices only (not on biases, norms' scales)."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)

    @torch.no_grad()
    def generate(self, idx, new_tokens, temperature=1.0, top_k=None, sample=False):
        """Append `new_tokens` tokens to idx (b, t): the likeliest one each time, or sampled."""
        for _ in range(new_tokens):
            context = idx if idx.size(1) <= self.cfg.context else idx[:, -self.cfg.context:]
            logits, _ = self(context)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                logits = logits.masked_fill(logits < kth, -float("inf"))
            probs = F.softmax(logits, dim=-1)
            if sample:
                nxt = torch.multinomial(probs, num_samples=1)
            else:
                nxt = probs.argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, nxt), dim=1)
        return idx
