"""`tinytorch.utils`, as `torch.utils`: `tinytorch.utils.data` (written by hand, like testing.py)."""


def __getattr__(name):
    if name == "data":  # `tt.utils.data` without importing it first, as in PyTorch
        from tinytorch import _submodule
        return _submodule("utils.data")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
