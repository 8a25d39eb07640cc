"""Your Tensor agrees with numpy: building, indexing, strided views and arithmetic.

Run it with `./learn milestone 01`: it imports *your* tinytorch package (what `./learn export 01`
wrote), never the notebook, so it shows what later modules will build on.
"""
REQUIRES = ("01_tensor",)

import numpy as np

from tinytorch.tensor_base import Tensor, arange, float32, int64, tensor


def same(t, array):
    return t.shape == array.shape and np.array_equal(np.asarray(t.tolist()), array)


grid = arange(12).to(float32)
m = Tensor(grid.storage, (3, 4))
reference = np.arange(12, dtype=np.float32).reshape(3, 4)
assert same(m, reference), "a (3, 4) tensor over arange(12)"
transposed = Tensor(m.storage, (4, 3), (m.strides[1], m.strides[0]), m.storage_offset())
assert same(transposed, reference.T), "swapping the strides transposes without copying"
assert transposed.storage is m.storage
second_column = Tensor(m.storage, (3,), (m.strides[0],), 1)
assert same(second_column, reference[:, 1]), "a column is a view with one stride and an offset"
assert same(m * 2 + 1, reference * 2 + 1) and same(m + m, reference + reference)
counts = tensor([[1, 2], [3, 4]])
assert counts.dtype is int64 and (counts / 2).dtype is float32, "int / int gives floats, like PyTorch"
print(m)
print("transposed view, strides", transposed.strides, "sharing the same storage:")
print(transposed)
print("milestone 01 passed: your Tensor agrees with numpy")
