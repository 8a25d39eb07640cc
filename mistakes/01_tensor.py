"""Catalogued mistakes of module 01_tensor (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("dtypes", "an unsupported numpy dtype returns None",
            "    if found is None:\n        names", "    if found is None and False:\n        names",
            says="as_dtype returns None for a numpy dtype that TinyTorch does not support (float16, say): it must "
            "raise a TypeError that lists the supported dtypes."),
    Mistake("dtypes", "numpy's promotion across categories (int64 with float32 gives float64)",
            "    if a.category != b.category:\n        return a if a.category > b.category else b\n", "",
            says="promote_types gives numpy's answer across categories (an integer with float32 widens to "
            "float64): in PyTorch the higher category simply wins."),
    Mistake("contiguous_strides", "size-0 dimensions multiply the stride by 0",
            "step *= max(size, 1)", "step *= size",
            says="your strides collapse to 0 when a dimension has size 0: PyTorch counts an empty dimension as "
            "size 1 in the running product, so empty tensors keep positive strides."),
    Mistake("contiguous_strides", "negative sizes accepted",
            "if any(size < 0 for size in shape):", "if False:",
            says="contiguous_strides accepts a negative size: a shape with a size below 0 is not a shape, so it "
            "must be refused with an error that names it."),
    Mistake("contiguous_strides", "strides returned as a list",
            "return tuple(reversed(strides))", "return list(reversed(strides))",
            says="contiguous_strides returns a list: strides are a tuple, like shapes, and a list never equals a "
            "tuple."),
    Mistake("strides_by_hand", "the transpose read with the original strides",
            "q3_position = 9", "q3_position = 1 * 3 + 2",
            says="your answer to question 3 reads the transpose with the strides of question 2: the transposed "
            "view has its own strides, given in the question."),
    Mistake("strides_by_hand", "the offset forgotten", "q4_values = [1, 3, 5, 7]", "q4_values = [0, 2, 4, 6]",
            says="your values for question 4 start at storage position 0: the offset says where the tensor's first "
            "element sits, and every other position is counted from it.",
            hidden_only="hidden-only: a by-hand answer; a visible test would print it before the learner reasons it out "
            "(the check cell after the Tensor class compares it)"),
    Mistake("storage_index", "negative indices not wrapped",
            "        if i < 0:\n            i += size\n", "",
            says="a negative index reads the wrong element or fails: as in Python lists, -1 means the last element "
            "of its dimension, so bring a negative index into range first."),
    Mistake("storage_index", "index equal to the size accepted",
            "if not -size <= i < size:", "if not -size <= i <= size:",
            says="an index equal to its dimension's size is accepted and reads past the dimension: the valid "
            "indices stop one short of the size, so it must raise IndexError."),
    Mistake("storage_index", "offset ignored", "position = offset", "position = 0",
            says="storage_index ignores the offset, so any tensor that does not start at storage position 0 reads "
            "the wrong element."),
    Mistake("strided_view", "offset passed in elements, not bytes",
            "offset=offset * itemsize", "offset=offset",
            says="strided_view hands numpy the offset counted in elements, but numpy counts it in bytes: a tensor "
            "with a nonzero offset starts at the wrong place."),
    Mistake("strided_view", "the result is a copy, not a view of the storage",
            "strides=tuple(s * itemsize for s in strides))", "strides=tuple(s * itemsize for s in strides)).copy()",
            says="strided_view returns a copy: writing into the array it returns must change the tensor's storage, "
            "so the array has to share the storage's memory."),
    Mistake("check_layout", "the last index taken as n, not n - 1",
            "highest = offset + sum((n - 1) * s", "highest = offset + sum(n * s",
            says="check_layout refuses layouts that fit: your highest position takes each dimension's index one "
            "past its last valid value."),
    Mistake("check_layout", "negative strides never checked", "if lowest < 0 or highest >= size:", "if highest >= size:",
            says="check_layout never checks the low end: with a negative stride a layout can reach below position "
            "0, and that must be refused too."),
    Mistake("check_layout", "empty tensors checked like the others", "    if math.prod(shape) == 0:\n        return\n", "",
            says="check_layout refuses some empty tensors: a tensor with no elements reads nothing from its "
            "storage, so it always fits, whatever its strides and offset."),
    Mistake("flatten_nested", "ragged lists accepted", "if shape != first_shape:", "if False:",
            says="flatten_nested accepts ragged lists such as rows of different lengths: the items of one list "
            "must all have the same shape, else raise ValueError."),
    Mistake("flatten_nested", "an empty list gives shape ()", "return (0,), []", "return (), []",
            says="an empty list comes out with a 0-d shape: an empty list is one dimension of length zero, not a "
            "single number."),
    Mistake("flatten_nested", "non-numbers accepted",
            "        raise TypeError(f\"cannot make a tensor from", "        return (), [data]\n        raise TypeError(f\"cannot make a tensor from",
            says="flatten_nested turns a string or None into a 0-d tensor: only bool, int and float are numbers "
            "here; anything else must raise TypeError naming the value."),
    Mistake("operand_dtype", "bool asked after int (True becomes int64)",
            "    if isinstance(operand, (bool, np.bool_)):\n        return bool_\n"
            "    if isinstance(operand, numbers.Integral):\n        return DEFAULT_INT\n",
            "    if isinstance(operand, numbers.Integral):\n        return DEFAULT_INT\n"
            "    if isinstance(operand, (bool, np.bool_)):\n        return bool_\n",
            says="True and False come out as int64: Python's bool is a subclass of int, so the order in which you "
            "test an operand's type matters."),
    Mistake("operand_dtype", "a 0-d tensor ranks like a tensor with dimensions", "return 2 if operand.shape else 1", "return 2",
            says="operand_priority gives a 0-d tensor the rank of a tensor with dimensions: PyTorch ranks it "
            "between a Python number and a tensor with dimensions."),
    Mistake("result_type", "operand priority ignored", "if priority == top:", "if True:",
            says="result_type promotes every operand of the top category alike: among those, only the ones of the "
            "highest priority may decide the dtype."),
    Mistake("result_type", "Python numbers widen like tensors",
            "top = max(priority for priority, _ in candidates)", "top = 0",
            says="result_type lets Python numbers decide (an int32 tensor plus 7 gives int64): within the top "
            "category, the operands that count are those of the highest priority present."),
    Mistake("result_type", "a 0-d tensor ranks like a tensor with dimensions",
            "[(operand_priority(x), d)", "[(2 if isinstance(x, Tensor) else 0, d)",
            says="result_type ranks a 0-d tensor like a tensor with dimensions, so a 0-d float64 widens a float32 "
            "tensor: rank each operand with operand_priority."),
    Mistake("result_type", "priority applied before the category",
            "category = max(d.category for d in dtypes)",
            "category = max(d.category for x, d in zip(operands, dtypes)\n"
            "                   if operand_priority(x) == max(map(operand_priority, operands)))",
            says="result_type filters by priority before it finds the category, so an int64 tensor plus a 0-d "
            "float64 tensor stays integer: the highest category comes first."),
    Mistake("tensor_class", "t[i, j] returns a copy, not a view",
            "return type(self)(self.storage, (), (), position)",
            "return type(self).tensor(self.storage[position].item())",
            says="indexing with a full index returns a tensor holding a copy of the element: it must be a 0-d "
            "tensor sharing the storage, so that writing into it changes the original."),
    Mistake("tensor_class", "item() ignores the layout",
            "return self.storage[storage_index((0,) * self.ndim, self.shape, self.strides, self.offset)].item()",
            "return self.storage[0].item()",
            says="item() reads the storage's first element whatever the layout: a one-element view, such as t[i, "
            "j], must read its own element through its offset."),
    Mistake("tensor_class", "item() of a tensor with many elements returns its first",
            "        if self.numel() != 1:\n            raise RuntimeError(f\"a tensor with", "        if False:\n            raise RuntimeError(f\"a tensor with",
            says="item() of a tensor with several elements returns one of them: only a one-element tensor has a "
            "single value, so the others must raise RuntimeError."),
    Mistake("tensor_class", "__setitem__ assumes a contiguous layout",
            "position = storage_index(self._full_index(index), self.shape, self.strides, self.offset)\n        self.storage[position] = value",
            "position = storage_index(self._full_index(index), self.shape, contiguous_strides(self.shape), self.offset)\n"
            "        self.storage[position] = value",
            says="assigning t[i, j] = v writes to the wrong place in a tensor whose strides are not the contiguous "
            "ones (a transpose, say): write through the tensor's own layout."),
    Mistake("tensor_class", "tensor operands not cast (numpy's promotion instead of PyTorch's)",
            "b = b._numpy().astype(dtype.numpy_dtype, copy=False)", "b = b._numpy()",
            says="arithmetic between tensors of different dtypes can come out in numpy's dtype (a float32 tensor "
            "plus an int64 one gives float64): every tensor operand must be cast to result_type's dtype."),
    Mistake("tensor_class", "reflected operands not swapped", "if reverse:", "if False:",
            says="2 - t computes t - 2: when the tensor is the right-hand operand (reverse), the two operands must "
            "reach op in the other order."),
    Mistake("tensor_class", "integer division keeps numpy's float64",
            "if op is np.divide and not dtype.is_floating_point:", "if False:",
            says="dividing integer tensors gives numpy's float64: PyTorch's true division of integers or bools "
            "gives the default float dtype."),
    Mistake("tensor_class", "operands read from the storage, ignoring strides and offset",
            "a = a._numpy().astype(dtype.numpy_dtype, copy=False)",
            "a = a.storage[:a.numel()].reshape(a.shape).astype(dtype.numpy_dtype, copy=False)",
            says="arithmetic on a view (a transpose, or a tensor with an offset) reads the storage in plain order: "
            "read each operand through its own layout."),
    Mistake("tensor_class", "tensor() shares memory with a numpy array",
            "return cls._from_array(array.astype(dtype.numpy_dtype, copy=True))",
            "return cls._from_array(array.astype(dtype.numpy_dtype, copy=False))",
            says="tensor(array) shares memory with the numpy array, so changing the array later changes the "
            "tensor: a new tensor must own its values."),
    Mistake("tensor_class", "nested lists take numpy's dtype, not result_type",
            "dtype = result_type(*values) if values else DEFAULT_FLOAT",
            "dtype = as_dtype(np.array(values).dtype) if values else DEFAULT_FLOAT",
            says="tensor([1, 2.5]) gets numpy's dtype (float64), not PyTorch's: the dtype of nested lists follows "
            "the same promotion rules as arithmetic."),
    Mistake("tensor_class", "to() copies even when the dtype is already right",
            "return self if dtype is self.dtype else self._from_array", "return self._from_array",
            says="to(dtype) copies the tensor even when it already has that dtype: PyTorch then returns the very "
            "same tensor."),
    Mistake("tensor_class", "clone() of a contiguous tensor shares its storage",
            "return self._from_array(self._numpy().copy())", "return self._from_array(self._numpy())",
            says="clone() of a contiguous tensor shares its storage, so writing into the clone changes the "
            "original: a clone must own a fresh copy."),
    Mistake("tensor_class", "size(dim) ignores dim", "return self.shape if dim is None else self.shape[dim]", "return self.shape",
            says="size(d) returns the whole shape: with a dimension given, it must return that dimension's size (a "
            "negative d counting from the end)."),
    Mistake("tensor_class", "bool() of many elements is that of the first",
            "            raise RuntimeError(f\"the truth value",
            "            return bool(self.numpy().reshape(-1)[0])\n            raise RuntimeError(f\"the truth value",
            says="bool() of a tensor with several elements returns a value: its truth is ambiguous, so it must "
            "raise RuntimeError."),
    Mistake("tensor_class", "exp() and sqrt() of integers keep numpy's float64",
            "        if float_result and not self.dtype.is_floating_point:\n            a = a.astype(DEFAULT_FLOAT.numpy_dtype)\n", "",
            says="exp() and sqrt() of an integer tensor come out as float64: PyTorch gives them the default float "
            "dtype (see _unary's docstring)."),
]
MISTAKES += [
    Mistake("check_layout", "a layout one past the storage's end accepted", "highest >= size:", "highest > size:",
            says="check_layout accepts a layout whose last element sits one position past the storage's end: that "
            "element would be read from foreign memory."),
    Mistake("check_layout", "a layout that ends at the storage's last element refused", "highest >= size:", "highest >= size - 1:",
            says="check_layout refuses a layout whose last element is exactly the storage's last position: that "
            "layout fits, only positions beyond it are out."),
]
