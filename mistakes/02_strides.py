"""Catalogued mistakes of module 02_strides (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("is_contiguous_layout", "size-1 dimensions not ignored", "if size != 1:", "if True:",
            says="is_contiguous_layout calls a layout non-contiguous because of the stride of a size-1 dimension: "
            "a dimension of size 1 never moves the read position, so its stride does not matter."),
    Mistake("is_contiguous_layout", "empty tensors not treated as contiguous",
            "    if 0 in shape:\n        return True\n", "",
            says="is_contiguous_layout says some empty tensors are not contiguous: a tensor with no elements is "
            "always contiguous, whatever its strides."),
    Mistake("is_contiguous_layout", "each stride compared with the next size, not the product of the sizes after it",
            "expected *= size", "expected = size",
            says="is_contiguous_layout judges layouts of three or more dimensions wrongly: the stride each "
            "dimension needs is built from every later dimension, not from the next one alone."),
    Mistake("reference_copy", "offset ignored", "position = offset", "position = 0",
            says="reference_copy starts reading at storage position 0, so a view with an offset copies the wrong "
            "elements: its first element sits where the offset says."),
    Mistake("reference_copy", "the odometer does not rewind a finished dimension",
            "position -= strides[d] * shape[d]", "pass",
            says="reference_copy's position runs away when an index wraps around: resetting an index from its size "
            "back to 0 must also take back the steps it made in the storage."),
    Mistake("reference_copy", "first dimension turns fastest (column-major order)",
            "for d in reversed(range(len(shape))):", "for d in range(len(shape)):",
            says="reference_copy copies in column-major order (first index turning fastest): in row-major order "
            "the last index turns fastest, like an odometer."),
    Mistake("permute_layout", "strides of a transpose not swapped",
            "tuple(strides[d] for d in dims)", "tuple(strides)",
            says="permute_layout moves the sizes but leaves the strides where they were: each stride must travel "
            "with its size to the dimension's new position."),
    Mistake("permute_layout", "negative dims not wrapped before the duplicate check",
            "dims = [wrap_dim(d, len(shape)) for d in dims]", "dims = list(dims)",
            says="permute_layout misses a dimension named twice when one of the names is negative: wrap every dim "
            "before looking for duplicates."),
    Mistake("permute_layout", "the inverse permutation (old dimension k moved to position dims[k])",
            "return tuple(shape[d] for d in dims), tuple(strides[d] for d in dims)",
            "inverse = sorted(range(len(dims)), key=lambda k: dims[k])\n"
            "    return tuple(shape[d] for d in inverse), tuple(strides[d] for d in inverse)",
            says="permute_layout applies the inverse permutation (old dimension k lands at position dims[k]): the "
            "view's dimension k is the one named at position k. It shows only with three or more dimensions."),
    Mistake("slice_dim", "step ignored in the stride", "return count, stride * step, start * stride",
            "return count, stride, start * stride",
            says="slice_dim keeps the dimension's stride when the slice has a step: taking every step-th element "
            "makes each step of the view jump further in the storage."),
    Mistake("slice_dim", "size rounded down", "count = max(0, (stop - start + step - 1) // step)",
            "count = max(0, (stop - start) // step)",
            says="slice_dim loses the last element when the slice's length is not a multiple of its step: a "
            "partial last step still reaches one more element."),
    Mistake("slice_dim", "negative steps accepted", "if index.step is not None and index.step <= 0:", "if False:",
            says="slice_dim accepts a negative step: PyTorch refuses any step that is not positive, with a "
            "ValueError."),
    Mistake("slice_dim", "start and stop not clamped (no index.indices)", "start, stop, step = index.indices(size)",
            "start, stop, step = index.start or 0, size if index.stop is None else index.stop, index.step or 1",
            says="slice_dim breaks on negative or out-of-range bounds (t[-2:] or t[2:100]): Python clamps and "
            "wraps a slice's start and stop, and slice objects can do it for you."),
    Mistake("slice_dim", "offset moved by start, not start * stride", "return count, stride * step, start * stride",
            "return count, stride * step, start",
            says="slice_dim moves the offset by the start index alone: the offset counts storage positions, not "
            "indices of this dimension, so it is wrong wherever the stride is not 1."),
    Mistake("basic_index_layout", "offset ignored in slicing", "            offset += delta\n", "",
            says="basic_index_layout forgets what a slice's start adds to the offset: a slice that starts past 0 "
            "must move where the view begins in the storage."),
    Mistake("basic_index_layout", "negative int indices not wrapped", "            if i < 0:\n                i += shape[d]\n", "",
            says="a negative int index reads the wrong place: -1 means the last element of its dimension, so wrap "
            "it before moving the offset."),
    Mistake("basic_index_layout", "an int index out of range accepted",
            "if not -shape[d] <= i < shape[d]:", "if False:",
            says="basic_index_layout accepts an int index outside its dimension: it must raise IndexError naming "
            "the dimension and its size."),
    Mistake("basic_index_layout", "ellipsis stands for one dimension only",
            "for _ in range(ndim - used):", "for _ in range(min(1, ndim - used)):",
            says="the ellipsis stands for a single dimension only: it must expand to as many full dimensions as "
            "the ints and slices leave unindexed."),
    Mistake("basic_index_layout", "None consumes a dimension of the tensor",
            "new_strides.append(shape[d] * strides[d] if d < ndim else 1)",
            "new_strides.append(shape[d] * strides[d] if d < ndim else 1)\n            d += 1",
            says="None uses up one of the tensor's dimensions: it only inserts a new size-1 dimension, and the "
            "next entry still indexes the same dimension of the tensor."),
    Mistake("layouts_by_hand", "the transpose's strides not swapped", "q1_strides = (1, 4, 12)", "q1_strides = (12, 4, 1)",
            says="your strides for question 1 are the base's own: a transpose keeps the storage and moves each "
            "stride with its dimension."),
    Mistake("layouts_by_hand", "the slice's offset forgotten", "q2_layout = ((3, 2), (4, 2), 12)", "q2_layout = ((3, 2), (4, 2), 0)",
            says="your layout for question 2 starts at offset 0: the int index that picks a block of the base "
            "moves where the view begins."),
    Mistake("layouts_by_hand", "a view after transpose thought possible", "q5_view_ok = False", "q5_view_ok = True",
            says="your offset for question 3 counts the slice's start but not the int index on the last dimension: "
            "an int index moves the offset too, although its dimension disappears.",
            hidden_only="hidden-only: a by-hand answer that needs view_strides (a later exercise); a visible test would print "
            "it before the learner reasons it out (the cell after the Tensor class shows it)"),
    Mistake("layouts_by_hand", "the int index left out of the offset", "q3_layout = ((2, 2), (12, 4), 7)",
            "q3_layout = ((2, 2), (12, 4), 4)",
            says="your answer to question 5 says the transpose can be merged without a copy: list the storage "
            "positions view[0] would read, in order, and check whether one stride steps through them."),
    Mistake("layouts_by_hand", "a view of a slice given contiguous strides", "q6_strides = (12, 1)", "q6_strides = (8, 1)",
            says="your strides for question 6 are those of a fresh contiguous tensor: the slice still lives in the "
            "base's storage, so the merged view keeps the base's jump between blocks.",
            hidden_only="hidden-only: a by-hand answer that needs view_strides (a later exercise); a visible test would print "
            "it before the learner reasons it out (the cell after the Tensor class shows it)"),
    Mistake("view_strides", "dimensions merged whatever their strides",
            "if chunks and chunks[-1][1] == size * stride:", "if chunks:",
            says="view_strides merges neighbouring dimensions whose strides do not line up, so it finds views that "
            "do not exist: merge only where the outer step jumps exactly over the inner run."),
    Mistake("view_strides", "size-1 dimensions not skipped",
            "        if size == 1:\n            continue\n", "",
            says="view_strides lets a size-1 dimension split a chunk, so it refuses views that exist: dimensions "
            "of size 1 never move the read position and must be left out of the chunks."),
    Mistake("view_strides", "new strides not scaled by the chunk's stride", "result[j] = stride * filled", "result[j] = filled",
            says="view_strides gives each group the strides of a chunk with stride 1: inside a group, the strides "
            "are scaled by the chunk's own stride (a slice with a step shows it)."),
    Mistake("view_strides", "a merged chunk keeps its outer dimension's stride",
            "chunks[-1] = [chunks[-1][0] * size, stride]", "chunks[-1] = [chunks[-1][0] * size, chunks[-1][1]]",
            says="when view_strides merges two dimensions, the chunk keeps the outer dimension's stride: a chunk "
            "steps with the stride of its innermost dimension."),
    Mistake("broadcast_shapes", "broadcasting aligned from the left",
            "a = (1,) * (ndim - len(so_far)) + so_far", "a = so_far + (1,) * (ndim - len(so_far))",
            says="broadcast_shapes pads the shorter shape on the right, so (4, 3) and (3,) clash: shapes are "
            "aligned at their trailing dimensions."),
    Mistake("broadcast_shapes", "a size 1 in the first shape does not stretch",
            "            elif x == 1:\n                combined.append(y)\n", "",
            says="broadcast_shapes refuses a size 1 in the first shape against a larger size: a 1 stretches to the "
            "other size whichever of the two shapes it is in."),
    Mistake("broadcast_shapes", "error does not name the shapes",
            ": shapes {so_far} and {shape} \"", ": the shapes \"",
            says="broadcast_shapes' error does not show the shapes: the message must contain both shapes as tuples "
            "and the clashing dimension, so the user can find the bad operand."),
    Mistake("broadcast_shapes", "sizes combined by max, so 1 and 0 give 1",
            "            if x == y or y == 1:\n                combined.append(x)\n            elif x == 1:\n                combined.append(y)\n",
            "            if x == y or x == 1 or y == 1:\n                combined.append(max(x, y))\n",
            says="broadcast_shapes combines a 1 and a 0 into 1: a 1 stretches to the other size even when that "
            "size is smaller, so an empty dimension stays empty."),
    Mistake("expand_layout", "stretched size-1 dimensions keep their stride",
            "        elif old == 1 and n >= 0:\n            out_shape.append(n)\n            out_strides.append(0)",
            "        elif old == 1 and n >= 0:\n            out_shape.append(n)\n            out_strides.append(stride)",
            says="expand_layout keeps the stride of a stretched size-1 dimension, so its indices read different "
            "elements (and may run past the storage): they must all read the one element."),
    Mistake("expand_layout", "new leading dimensions get stride 1",
            "            out_shape.append(n)\n            out_strides.append(0)\n            continue",
            "            out_shape.append(n)\n            out_strides.append(1)\n            continue",
            says="expand_layout gives a new leading dimension a stride that moves in the storage: every index of a "
            "new dimension must read the same elements as the others."),
    Mistake("expand_layout", "any size accepted", "elif old == 1 and n >= 0:", "elif n >= 0:",
            says="expand_layout stretches dimensions whose size is not 1: only a size-1 dimension can stretch; any "
            "other size must stay, else RuntimeError with PyTorch's message."),
    Mistake("expand_layout", "-1 accepted for a new leading dimension", "            if n < 0:\n", "            if False:\n",
            says="expand_layout accepts -1 for a new leading dimension: -1 means keep the existing size, and a new "
            "dimension has none, so it is a RuntimeError."),
    Mistake("reduction_dims", "keepdim dropped", "    if keepdim:\n        return tuple(1 if k in dims else n for k, n in enumerate(shape))\n", "",
            says="reduced_shape removes the reduced dimensions even with keepdim: then each of them must stay, "
            "with size 1, so the result broadcasts against the input."),
    Mistake("reduction_dims", "repeated dims accepted", "if wrapped.count(d) > 1:", "if False:",
            says="normalize_dims accepts a dimension named twice (say 1 and -1 of a 2-d tensor): after wrapping, a "
            "repeated dimension is a RuntimeError."),
    Mistake("reduction_dims", "an empty tuple reduces nothing",
            "if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):", "if dim is None:",
            says="normalize_dims treats an empty tuple of dims as no dimensions at all: in PyTorch an empty tuple "
            "means every dimension, as None does."),
    Mistake("reduction_dims", "dims returned in the order given, not sorted", "return tuple(sorted(wrapped))", "return tuple(wrapped)",
            says="normalize_dims returns the dims in the order given: the result must be sorted, so that two "
            "orders of the same dims name the same reduction."),
    Mistake("reduction_dims", "a 0-d tensor reduces over dimension 0", "    if ndim == 0:\n        return ()\n", "",
            says="normalize_dims of a 0-d tensor returns a dimension that does not exist: a 0-d tensor accepts 0 "
            "and -1 but has nothing to reduce."),
    Mistake("matmul_shape", "a 1-d operand's promoted dimension kept in the result",
            "return batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)", "return batch + (a2[-2], b2[-1])",
            says="matmul_shape keeps the size-1 dimension a 1-d operand was promoted with (a matrix times a vector "
            "comes out 2-d): that dimension leaves the result again."),
    Mistake("matmul_shape", "batch dimensions not broadcast (taken from a)",
            "batch = broadcast_shapes(a2[:-2], b2[:-2])", "batch = a2[:-2]",
            says="matmul_shape takes the batch dimensions from a alone: the batch dimensions of the two operands "
            "broadcast against each other."),
    Mistake("matmul_shape", "a 1-d b promoted to a row, not a column", "b2 = b + (1,) if len(b) == 1 else b",
            "b2 = (1,) + b if len(b) == 1 else b",
            says="matmul_shape promotes a 1-d b to a row: a 1-d b stands for a column, so a matrix times a vector "
            "fails or gets the wrong shape."),
    Mistake("matmul_shape", "inner sizes not checked", "if a2[-1] != b2[-2]:", "if False:",
            says="matmul_shape never compares the inner sizes: when a's last size and b's second-to-last differ, "
            "raise RuntimeError with matmul_error's message."),
    Mistake("views", "unsqueeze(-1) inserts before the last dimension",
            "d = wrap_dim(dim, self.ndim + 1)", "d = wrap_dim(dim, self.ndim)",
            says="unsqueeze(-1) puts the new dimension before the last one: a negative dim counts in the result, "
            "which has one more dimension than the tensor."),
    Mistake("views", "squeeze(dim) drops every size-1 dimension",
            "dims = range(self.ndim) if dim is None else normalize_dims(dim, self.ndim)", "dims = range(self.ndim)",
            says="squeeze(dim) drops every size-1 dimension: with dim given, only the dimensions it names may go."),
    Mistake("views", "reshape never copies", "return self.contiguous().view(shape)", "return self.view(shape)",
            says="reshape fails where no view exists (a transpose flattened, say): then it must copy into a "
            "contiguous tensor and view that."),
    Mistake("views", "flatten leaves end_dim out", "merged = math.prod(self.shape[start:end + 1])\n        return self.reshape(self.shape[:start] + (merged,) + self.shape[end + 1:])",
            "merged = math.prod(self.shape[start:end])\n        return self.reshape(self.shape[:start] + (merged,) + self.shape[end:])",
            says="flatten leaves its end dimension out of the merge: start_dim and end_dim are both included, so "
            "flatten() of a 2-d tensor is 1-d."),
    Mistake("views", "contiguous() always copies", "        if self.is_contiguous():\n            return self\n", "",
            says="contiguous() copies a tensor that is already contiguous: then it must return the tensor itself, "
            "as PyTorch does."),
]
MISTAKES += [
    Mistake("views", "reshape copies every non-contiguous tensor, even where view_strides finds a view",
            "        if strides is None:\n            return self.contiguous().view(shape)",
            "        if strides is None or not self.is_contiguous():\n            return self.contiguous().view(shape)",
            says="reshape copies a non-contiguous tensor even when view_strides finds a view for the new shape: "
            "copy only when there is no view."),
    Mistake("views", "flatten of a 0-d tensor returns it unchanged (shape ())",
            "        if self.ndim == 0:\n            return self.reshape(1)", "        if self.ndim == 0:\n            return self",
            says="flatten() of a 0-d tensor returns it with shape (): flattening a single number gives a 1-d "
            "tensor of one element."),
]
