"""Catalogued mistakes of module 03_autograd (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("scalar", "gradient overwritten instead of accumulated over uses",
            "parent.grad += local * node.grad", "parent.grad = local * node.grad",
            says="a value used more than once ends with the gradient of its last use only: each use adds its own "
            "contribution to a parent's grad."),
    Mistake("scalar", "nodes visited in topological order instead of its reverse",
            "for node in reversed(order):", "for node in order:",
            says="backprop walks from the leaves up, so a node passes its gradient on before it is complete: the "
            "walk goes from the output back to the leaves."),
    Mistake("scalar", "local derivative factor missing (the gradient passed on unchanged)",
            "parent.grad += local * node.grad", "parent.grad += node.grad",
            says="backprop passes a node's gradient to its parents unchanged: by the chain rule each parent "
            "receives the node's gradient times the local derivative with respect to it."),
    Mistake("scalar", "a node reached along two paths is listed twice",
            "            if node in seen:\n                return\n", "",
            says="a node reached along two paths is listed twice, so its contribution reaches its parents twice: "
            "the depth-first search must skip nodes it has already seen."),
    Mistake("scalar", "the root's gradient not seeded with 1", "        self.grad = 1.0\n", "",
            says="every gradient stays 0 after backprop: the walk has to start from the output's gradient with "
            "respect to itself, which is not 0."),
    Mistake("scalar", "local derivatives of * swapped",
            "(other.data, self.data), \"*\")", "(self.data, other.data), \"*\")",
            says="x * y gives each factor the local derivative that belongs to the other one: check which number "
            "goes with which parent."),
    Mistake("scalar", "x - y passes +1 to y", "(1.0, -1.0), \"-\")", "(1.0, 1.0), \"-\")",
            says="x - y gives y a gradient of the wrong sign: a larger y makes the result smaller."),
    Mistake("scalar", "x ** n without the factor n", "(n * self.data ** (n - 1),)", "(self.data ** (n - 1),)",
            says="the local derivative of x ** n is off by a constant factor: check it against the power rule on x "
            "** 2, whose derivative at 3 is 6."),
    Mistake("scalar", "tanh's local derivative from x instead of tanh(x)",
            "(1.0 - t * t,)", "(1.0 - self.data * self.data,)",
            says="tanh's local derivative is computed from the input instead of from tanh's value: the derivative "
            "of tanh is written in terms of its output."),
    Mistake("scalar", "exp's local derivative is x", "return Scalar(e, (self,), (e,), \"exp\")",
            "return Scalar(e, (self,), (self.data,), \"exp\")",
            says="exp's local derivative uses the input itself: look again at what the derivative of the "
            "exponential is, and reuse the value just computed."),
    Mistake("context", "in-place modification of a saved tensor not detected",
            "if version is not None and t._version != version:", "if False:",
            says="a saved tensor changed in place before backward goes unnoticed: saved_tensors must compare each "
            "saved tensor's version now with the one saved, and raise RuntimeError if they differ."),
    Mistake("context", "versions not remembered at save time",
            "versions.append(t._version if isinstance(t, Tensor) else None)", "versions.append(None)",
            says="save_for_backward does not remember the tensors' versions, so no in-place change can ever be "
            "detected: keep each tensor's version as it was when saved."),
    Mistake("context", "a freed graph is not detected",
            "        if self.saved is None:\n            raise", "        if False:\n            raise",
            says="saved_tensors of a freed graph fails with some other error, or none: then raise RuntimeError "
            "saying the graph was freed, and that retain_graph=True keeps it."),
    Mistake("function_apply", "no_grad still records",
            "        if not _grad_mode.enabled:\n            return cls.forward(ctx, *args)\n", "",
            says="operations inside no_grad() are still recorded: when grad mode is off, apply must only compute, "
            "with no graph."),
    Mistake("function_apply", "records although no input requires grad",
            "if out is NotImplemented or True not in needs or", "if out is NotImplemented or",
            says="ops on tensors that do not require grad are recorded anyway (the result gets a grad_fn): record "
            "only when some argument requires grad."),
    Mistake("function_apply", "forward runs with grad mode on (its insides are recorded)",
            "        _grad_mode.enabled = False\n        try:", "        try:",
            says="the tensor operations inside forward record graphs of their own: forward must run with grad mode "
            "off, so that only the op itself is recorded."),
    Mistake("function_apply", "an input returned unchanged gets the new grad_fn",
            "            if out is a:", "            if False:",
            says="an op that returns its input unchanged gives that input a grad_fn, so a leaf stops being a leaf: "
            "record on a new tensor object sharing the data, never on the input."),
    Mistake("unbroadcast", "gradient not unbroadcast",
            "return grad.sum(axis=tuple(axes), keepdims=True).reshape(shape)", "return grad",
            says="unbroadcast returns the gradient unchanged: a broadcast input's gradient must be summed back to "
            "the input's own shape."),
    Mistake("unbroadcast", "size-1 dimensions not summed",
            "        if size == 1 and grad.shape[extra + i] != 1:\n            axes.append(extra + i)\n        elif",
            "        if size == 1 and grad.shape[extra + i] != 1:\n            pass\n        elif",
            says="unbroadcast leaves stretched size-1 dimensions as they are: where the input has size 1 and the "
            "gradient does not, the gradient must be summed over that dimension."),
    Mistake("unbroadcast", "leading dimensions not summed", "axes = list(range(extra))", "axes = []",
            says="unbroadcast keeps the leading dimensions the input does not have: the gradient must be summed "
            "over those too."),
    Mistake("topological_order", "topological order reversed", "    order.reverse()\n", "",
            says="topological_order returns its nodes from the leaves up: the order must start with the root and "
            "put every node before the nodes of its inputs."),
    Mistake("topological_order", "a shared node is visited twice",
            "        if node in seen:\n            continue\n", "",
            says="topological_order marks nodes as seen but expands a node again when it is popped a second time: "
            "check the mark first, or a diamond's shared node is listed twice."),
    Mistake("run_backward", "accumulation by assignment instead of addition",
            "grads[t.grad_fn] = gi if previous is None else previous + gi", "grads[t.grad_fn] = gi",
            says="the engine keeps only the last gradient that reaches a node: a node whose output is used twice "
            "(y = f(x) + g(x)) must receive the sum of both."),
    Mistake("run_backward", "done(node) never called, so the graph is never freed",
            "            self.done(node)\n", "",
            says="run never calls done for the nodes it walks, so the graph is never freed and a second backward "
            "goes through: done belongs after each node."),
    Mistake("run_backward", "broadcast gradients not fitted to the input",
            "                    gi = fit_gradient(gi, t)", "                    pass",
            says="the engine hands a broadcast input a gradient of the output's shape: fit each input's gradient "
            "to that input with the given helper before passing it on."),
    Mistake("run_backward", "nodes walked from the leaves up (topological order reversed)",
            "for node in topological_order(root.grad_fn):", "for node in reversed(topological_order(root.grad_fn)):",
            says="run walks the nodes from the leaves up, so each node runs backward before its gradient has "
            "arrived: the topological order starts at the root for a reason."),
    Mistake("run_backward", "needs_input_grad ignored: numbers and constants get gradients too",
            "if not needed or gi is None:", "if gi is None:",
            says="the engine gives gradients to inputs that asked for none (numbers, tensors without "
            "requires_grad): skip each input whose needs_input_grad flag is not set."),
    Mistake("mul_div", "Mul gradients swapped",
            "grad_a = grad * as_array(b) if", "grad_a = grad * as_array(a) if",
            says="Mul's gradient for a is built from a's own values: the derivative of a product with respect to "
            "one factor is made of the other factor."),
    Mistake("mul_div", "Div gradient of the divisor without its minus sign",
            "return grad / b, -grad * a / (b * b)", "return grad / b, grad * a / (b * b)",
            says="the divisor of a / b gets a gradient of the wrong sign: with a positive a, a larger b makes the "
            "quotient smaller."),
    Mistake("mul_div", "Div gradient of the divisor divided by b once, not twice",
            "return grad / b, -grad * a / (b * b)", "return grad / b, -grad * a / b",
            says="the divisor's gradient in a / b is off by a factor of b: the derivative of 1 / b falls faster "
            "than 1 / b itself."),
    Mistake("exp_log", "Exp backward applies exp to the saved output again",
            "return grad * out.numpy()", "return grad * np.exp(out.numpy())",
            says="Exp's backward takes the exponential of the saved output again: what forward saved already is "
            "the derivative."),
    Mistake("exp_log", "Log backward multiplies by x", "return grad / x.numpy()", "return grad * x.numpy()",
            says="Log's backward multiplies by the input: the derivative of the logarithm shrinks as x grows."),
    Mistake("gradcheck", "forward differences over 2 eps (wrong scale)",
            "numerical = (up - down) / (2 * eps)", "numerical = (up - down) / eps",
            says="gradcheck's numerical gradient is twice the true one: the central difference spans from x - eps "
            "to x + eps, and must be divided by that whole span."),
    Mistake("gradcheck", "only the first element of each input checked",
            "for index in np.ndindex(*array.shape):", "for index in list(np.ndindex(*array.shape))[:1]:",
            says="gradcheck compares only the first element of each input: a formula wrong in the other elements "
            "passes, so every element must be perturbed in turn."),
    Mistake("gradcheck", "inputs not restored after perturbing",
            "            array[index] = original\n            numerical", "            numerical",
            says="gradcheck leaves each perturbed element shifted, so later differences are taken at the wrong "
            "point and the input comes back changed: restore each element exactly after measuring."),
    Mistake("gradcheck", "only the first input checked",
            "for position, i in enumerate(checked):", "for position, i in enumerate(checked[:1]):",
            says="gradcheck checks only the first input that requires grad: a wrong gradient of any other input "
            "goes unnoticed."),
]
MISTAKES += [
    Mistake("sum_mean", "Sum gradient not broadcast back (reduced dims lost)",
            "        return np.broadcast_to(g, ctx.shape), None, None, None",
            "        return np.broadcast_to(grad, ctx.shape), None, None, None",
            says="Sum's backward copies the gradient along the wrong dimensions (or fails) when dims are reduced "
            "without keepdim: put the reduced dimensions back, with size 1, first."),
    Mistake("sum_mean", "Mean gradient not divided by the count",
            "g = grad.reshape(reduced_shape(ctx.shape, dims, True)) / count",
            "g = grad.reshape(reduced_shape(ctx.shape, dims, True))",
            says="Mean's gradient is the same as Sum's: the mean divides by a count, and so must its gradient."),
    Mistake("permute_expand", "Permute gradient permuted with dims instead of their inverse",
            "inverse = np.argsort([wrap_dim(d, len(ctx.shape)) for d in dims])",
            "inverse = [wrap_dim(d, len(ctx.shape)) for d in dims]",
            says="Permute's backward reorders the gradient with the same dims as forward: that undoes only "
            "permutations that are their own inverse; try (1, 2, 0)."),
    Mistake("permute_expand", "negative permute dims not wrapped",
            "inverse = np.argsort([wrap_dim(d, len(ctx.shape)) for d in dims])", "inverse = np.argsort(dims)",
            says="Permute's backward goes wrong when dims are negative: wrap each dim to a non-negative one before "
            "inverting the permutation."),
    Mistake("permute_expand", "Expand gradient averaged over the copies instead of summed",
            "        return unbroadcast(grad, ctx.shape), None",
            "        return unbroadcast(grad, ctx.shape) * math.prod(ctx.shape) / max(grad.size, 1), None",
            says="Expand's gradient is the mean over the copies: an element used many times receives the sum of "
            "all its uses' gradients."),
    Mistake("matmul", "matmul gradient transposed wrongly (b not transposed)",
            "grad_a = unbroadcast(G @ np.swapaxes(B, -1, -2), A.shape)",
            "grad_a = unbroadcast(G @ B, A.shape)",
            says="the gradient of a in a @ b uses b without transposing it: only square matrices hide this; "
            "compare the shape you get with a's shape."),
    Mistake("matmul", "matmul gradient of b with the transpose on the wrong side",
            "grad_b = unbroadcast(np.swapaxes(A, -1, -2) @ G, B.shape)",
            "grad_b = unbroadcast(np.swapaxes(A, -1, -2) @ np.swapaxes(G, -1, -2), B.shape)",
            says="the gradient of b in a @ b transposes the output gradient as well as a: check each factor's "
            "shape against the k x m result you need."),
    Mistake("matmul", "broadcast batch dims not summed",
            "grad_b = unbroadcast(np.swapaxes(A, -1, -2) @ G, B.shape).reshape(b.shape)",
            "grad_b = (np.swapaxes(A, -1, -2) @ G).reshape(b.shape)",
            says="when b has fewer batch dimensions than a, b's gradient keeps a's batch dimensions: it must be "
            "summed over the batch back to b's shape."),
    Mistake("matmul", "1-d operands not promoted", "        A = a[None, :] if a.ndim == 1 else a\n", "        A = a\n",
            says="a 1-d a breaks MatMul's backward: treat it as a one-row matrix while computing, and drop that "
            "dimension from its gradient again."),
    Mistake("index_backward", "repeated indices added with a buffered +=",
            "        np.add.at(out, index, grad)  # repeated positions: the scatter-add sums them",
            "        out[index] += grad",
            says="x[[0, 0, 2]] gives x.grad[0] only one of its two gradients: an in-place add through an index "
            "writes each position once, however often it repeats; an element picked twice must receive the sum."),
]
MISTAKES += [
    Mistake("context", "a saved number is checked for a version",
            "if version is not None and t._version != version:", "if t._version != version:",
            says="saved_tensors fails on a saved number or None: only tensors have a version to check; other "
            "entries are stored and returned as they are."),
    Mistake("function_apply", "an integer result is recorded",
            "if out is NotImplemented or True not in needs or out.storage.dtype not in _FLOAT_DTYPES:",
            "if out is NotImplemented or True not in needs:",
            says="an op with an integer result (a comparison, say) is recorded: only floating-point results can "
            "require grad and join the graph."),
    Mistake("unbroadcast", "sizes that disagree are not rejected",
            "        elif size != grad.shape[extra + i]:", "        elif False:",
            says="unbroadcast accepts a gradient whose sizes disagree with the shape (neither equal nor 1): such a "
            "gradient cannot come from broadcasting, so raise ValueError."),
    Mistake("topological_order", "no seen set: a node reached along two paths is expanded twice",
            "        if node in seen:\n            continue\n        seen.add(node)\n", "",
            says="topological_order keeps no record of the nodes it has expanded, so a node reached along two "
            "paths (a diamond) is expanded and listed twice."),
    Mistake("run_backward", "a leaf root gets no gradient",
            "            self.deliver(root, grad)\n            return", "            return",
            says="backward of a leaf tensor leaves its grad empty: when the root has no grad_fn, its gradient goes "
            "straight to it."),
    Mistake("mul_div", "Div gradient of the dividend multiplied by b",
            "return grad / b, -grad * a / (b * b)", "return grad * b, -grad * a / (b * b)",
            says="the dividend's gradient in a / b grows with b, yet a larger b makes the quotient less sensitive "
            "to a."),
    Mistake("exp_log", "Exp saves its input, so backward multiplies by x instead of exp(x)",
            "        out = BaseTensor.exp(x)\n        ctx.save_for_backward(out)",
            "        out = BaseTensor.exp(x)\n        ctx.save_for_backward(x)",
            says="Exp saves its input, so backward scales the gradient by x: save what backward reuses as the "
            "derivative, the output."),
    Mistake("exp_log", "Log saves its output, so backward divides by log(x) instead of x",
            "        ctx.save_for_backward(x)\n        return BaseTensor.log(x)",
            "        out = BaseTensor.log(x)\n        ctx.save_for_backward(out)\n        return out",
            says="Log saves its output, so backward divides by log(x): the derivative of the logarithm needs the "
            "input itself."),
    Mistake("gradcheck", "an unused input's missing gradient not taken as zero",
            "got = np.zeros(array.shape) if analytical[position] is None else analytical[position].numpy()",
            "got = analytical[position].numpy()",
            says="gradcheck fails on an input the function does not use: its analytical gradient comes back as "
            "None, which stands for zero."),
    Mistake("sum_mean", "Mean divided by the number of all elements, not of the reduced ones",
            "count = math.prod(ctx.shape[d] for d in dims)", "count = math.prod(ctx.shape)",
            says="Mean's gradient divides by the number of all elements, too small when only some dimensions are "
            "reduced: count only the elements each mean averaged."),
    Mistake("matmul", "1-d b not promoted", "        B = b[:, None] if b.ndim == 1 else b\n", "        B = b\n",
            says="a 1-d b breaks MatMul's backward: treat it as a one-column matrix while computing, and drop that "
            "dimension from its gradient again."),
    Mistake("matmul", "the dropped row dimension of a 1-d a not given back to grad",
            "        G = np.expand_dims(G, -2) if a.ndim == 1 else G\n", "",
            says="with a 1-d a, the output gradient lacks the row dimension the product dropped: give that "
            "dimension back before the formulas."),
    Mistake("var_max_where", "var backward ignores the correction",
            "/ max(count - correction, 0), None, None, None", "/ count, None, None, None",
            says="var's gradient ignores the correction: it divides by the number of elements instead of the count "
            "the forward divided by."),
    Mistake("var_max_where", "var backward without subtracting the mean",
            "2 * g * (x - x.mean(axis=dims, keepdims=True))", "2 * g * x",
            says="var's gradient leaves the mean out: each element's derivative depends on its distance from the "
            "mean."),
    Mistake("var_max_where", "a tie gives the whole gradient to both inputs",
            "share = cls.op(a, b) + 0.5 * (a == b)", "share = cls.op(a, b) + 1.0 * (a == b)",
            says="where the two inputs of maximum are equal, each gets the whole gradient, so the total doubles: "
            "PyTorch splits a tie evenly."),
    Mistake("var_max_where", "minimum's gradient goes to the larger input",
            "share = cls.op(a, b) + 0.5 * (a == b)", "share = np.greater(a, b) + 0.5 * (a == b)",
            says="minimum's gradient goes to the larger input: write the share with cls.op so that Minimum "
            "compares the other way."),
    Mistake("var_max_where", "where sends the gradients to the wrong inputs",
            "return None, np.where(c, grad, zero), np.where(c, zero, grad)",
            "return None, np.where(c, zero, grad), np.where(c, grad, zero)",
            says="where sends each gradient to the input that was not picked: the gradient goes to whichever of "
            "input and other the condition chose there."),
]
MISTAKES += [
    Mistake("run_backward", "a node that received no gradient raises KeyError", "g = grads.pop(node, None)", "g = grads.pop(node)",
            says="run raises KeyError at a node that received no gradient (a branch the output does not depend "
            "on): such a node gets nothing to pass on and is skipped."),
    Mistake("run_backward", "a node that received no gradient is not passed to done()",
            "            if g is not None:\n                input_grads = self.call(node, g)",
            "            if g is None:\n                continue\n            if True:\n                input_grads = self.call(node, g)",
            says="a node that received no gradient is skipped without done, so its part of the graph is never "
            "freed: done runs after every node, whether a gradient arrived or not."),
]
