"""`import tinytorch.utils.data`, PyTorch's path to the datasets and loader of module 05 (written by hand,
like testing.py; `tinytorch.data` is the same module's short name)."""
from tinytorch.data import *  # noqa: F401,F403
from tinytorch.data import __all__  # noqa: F401
