"""`import tinytorch.optim as optim`, as with `torch.optim`: the optimizers and schedules of module 05
(written by hand, like testing.py: nbdev exports them into `tinytorch.training`)."""
from tinytorch.training import (Optimizer, SGD, Adam, AdamW, LRScheduler, StepLR, WarmupCosineLR,
                                warmup_cosine, clip_grad_norm_)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "LRScheduler", "StepLR", "WarmupCosineLR",
           "warmup_cosine", "clip_grad_norm_"]
