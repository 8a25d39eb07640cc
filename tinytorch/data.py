"""`import tinytorch.data as data`, as with `torch.utils.data`: the datasets and loader of module 05
(written by hand, like testing.py: nbdev exports them into `tinytorch.training`)."""
from tinytorch.training import Dataset, TensorDataset, DataLoader, batch_indices, default_collate

__all__ = ["Dataset", "TensorDataset", "DataLoader", "batch_indices", "default_collate"]
