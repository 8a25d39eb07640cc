"""TinyTorch: a PyTorch-like framework built one notebook at a time (see modules/)."""
__version__ = "0.1.0"
