"""Catalogued mistakes of module 04_layers (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("module", "parameters of a nested submodule not found (no recursion)",
            "stack.extend(reversed(children))", "stack.extend(reversed(children)) if name == prefix else None",
            says="the parameters of modules nested two or more levels deep are not found: your walk stops at the "
                 "root's own children instead of descending into theirs."),
    Mistake("module", "a submodule is not registered",
            "                self._modules[name] = value\n", "                pass\n",
            says="a Module assigned as an attribute is set but never registered, so its parameters are missing from "
                 "parameters() and from the state dict."),
    Mistake("module", "a stale parameter entry survives reassignment",
            "            parameters.pop(name, None)\n", "",
            says="an attribute that held a Parameter and is then set to a plain value (or None) is still listed as a "
                 "parameter: a new assignment must drop the old registration."),
    Mistake("module", "a tied weight is yielded twice",
            "if p is not None and id(p) not in seen:", "if p is not None:",
            says="a Parameter shared by two modules (tied weights) is listed twice by named_parameters(): each "
                 "parameter object should appear once, under its first name."),
    Mistake("module", "load_state_dict ignores unexpected keys",
            "if strict and (missing or unexpected):", "if strict and missing:",
            says="in strict mode, a state dict with names the model does not have loads without complaint: strict "
                 "loading rejects extra names as well as missing ones."),
    Mistake("module", "shape mismatches are only caught in strict mode",
            "if name in own and tuple(np.shape(as_array(value))) != own[name].shape]",
            "if strict and name in own and tuple(np.shape(as_array(value))) != own[name].shape]",
            says="a value of the wrong shape is accepted when strict=False: the shape check holds in both modes; "
                 "strict only decides about missing and unexpected names."),
    Mistake("linear_function", "the input gradient is computed even when not needed",
            "grad_x = (g @ weight.numpy()).reshape(x.shape) if need_x else None",
            "grad_x = (g @ weight.numpy()).reshape(x.shape)",
            says="your backward computes the input's gradient even when nothing needs it (a first layer's input): "
                 "check which inputs need a gradient and return None for the others."),
    Mistake("linear_function", "bias gradient is a mean, not a sum",
            "grad_b = _blas_sum(g, (0,)) if need_b else None", "grad_b = g.mean(axis=0) if need_b else None",
            says="your bias gradient is averaged over the rows: the bias is broadcast to every row, so every row's "
                 "contribution counts in full."),
    Mistake("init_functions", "kaiming bound without the gain",
            "bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)", "bound = math.sqrt(3.0 / fan)",
            says="kaiming_uniform_'s bound leaves out the nonlinearity's gain, so the weights have the wrong spread: "
                 "the gain depends on the nonlinearity and its slope."),
    Mistake("init_functions", "fan_out mode ignored", "fan = fan_in if mode == \"fan_in\" else fan_out", "fan = fan_in",
            says="kaiming_uniform_ with mode='fan_out' still uses the fan-in: the mode argument chooses which fan goes "
                 "into the bound."),
    Mistake("init_functions", "xavier uses only fan_in",
            "bound = gain * math.sqrt(6.0 / (fan_in + fan_out))", "bound = gain * math.sqrt(3.0 / fan_in)",
            says="xavier_uniform_'s bound is computed from the fan-in alone: Xavier's rule balances both fans of the "
                 "weight."),
    Mistake("activations", "ReLU passes the gradient everywhere", "return grad * ctx.mask", "return grad",
            says="your ReLU backward lets the gradient through where the input was negative: it must be blocked there, "
                 "using the mask kept in forward."),
    Mistake("activations", "tanh derivative without the square",
            "return grad * (1 - ctx.out * ctx.out)", "return grad * (1 - ctx.out)",
            says="your tanh backward is right at 0 but wrong elsewhere: redo the quotient rule on sinh / cosh and "
                 "write the result with the kept tanh value."),
    Mistake("activations", "sigmoid derivative as sigma(x) alone",
            "return grad * ctx.out * (1 - ctx.out)", "return grad * ctx.out",
            says="your sigmoid backward gives ½ at x = 0 where the slope is ¼: differentiating (1 + e⁻ˣ)⁻¹ gives a "
                 "second factor, also expressed with σ."),
    Mistake("activations", "SiLU derivative without the product rule's second term",
            "return grad * ctx.s * (1 + ctx.x * (1 - ctx.s))", "return grad * ctx.s",
            says="your SiLU backward keeps only one term: SiLU is the product of x and σ(x), and the product rule also "
                 "differentiates the σ factor."),
    Mistake("gelu_function", "tanh GELU derivative misses the cubic term's 3",
            "du = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a * a)", "du = _SQRT_2_OVER_PI * (1 + 0.044715 * a * a)",
            says="your tanh-GELU backward is right at 0 but off elsewhere: recheck the chain rule through u(x), in "
                 "particular the derivative of its cubic term."),
    Mistake("gelu_function", "exact GELU derivative misses the x * pdf term",
            "        d += ctx.cdf\n        d *= grad\n", "        d = ctx.cdf * grad\n",
            says="your exact GELU backward keeps only Φ: GELU is x times Φ(x), and the product rule adds a second term "
                 "with the normal density."),
    Mistake("softmax", "softmax without the max subtraction",
            "e = np.exp(a - a.max(axis=dim, keepdims=True))", "e = np.exp(a)",
            says="your softmax gives nan for large logits because exp overflows: shift each row first so that no "
                 "exponent is positive (the result is mathematically the same)."),
    Mistake("softmax", "log-softmax as the log of softmax, without the max subtraction",
            "shifted = a - a.max(axis=dim, keepdims=True)\n        out = shifted",
            "shifted = a\n        out = shifted",
            says="your log-softmax overflows to inf or nan for large logits: shift the row as for softmax before any "
                 "exponential, and never take the log of a value that may be 0."),
    Mistake("softmax", "log-softmax backward forgets the sum",
            "return grad - np.exp(ctx.out) * grad.sum(axis=ctx.dim, keepdims=True), None",
            "return grad - np.exp(ctx.out) * grad, None",
            says="your log-softmax backward treats each output as depending on its own input only: every output of a "
                 "row depends on the whole row, so a sum along the row appears."),
    Mistake("cross_entropy", "cross-entropy without the max subtraction",
            "shifted = x - x.max(axis=1, keepdims=True)\n", "shifted = x\n",
            says="your cross-entropy gives inf or nan for large logits: compute the log-probabilities stably, shifting "
                 "each row before exponentiating."),
    Mistake("cross_entropy", "mean over all rows, ignored ones included",
            "count = int(keep.sum())", "count = n",
            says="with ignored rows present, your mean loss divides by every row: the mean is taken over the rows that "
                 "are not ignored."),
    Mistake("cross_entropy", "label smoothing ignored in backward",
            "        if eps:\n            d -= eps / c\n", "",
            says="with label_smoothing, your backward uses the one-hot target: the gradient must use the same smoothed "
                 "target distribution as the forward."),
    Mistake("mse_bce", "MSE gradient without the factor 2",
            "d = _reduce_grad(2 * ctx.diff, grad, ctx.reduction)", "d = _reduce_grad(ctx.diff, grad, ctx.reduction)",
            says="your MSE gradient for the input is half the true one: recheck the derivative of the square."),
    Mistake("mse_bce", "MSE gives the target the same gradient as the input", "return d, -d, None", "return d, d, None",
            says="your MSE gives the target the same gradient as the input: ask which way the difference moves when "
                 "the target grows."),
    Mistake("mse_bce", "BCE gradient sigma(x) without the target",
            "d = _reduce_grad(_sigmoid(ctx.a) - ctx.t, grad, ctx.reduction)", "d = _reduce_grad(_sigmoid(ctx.a), grad, ctx.reduction)",
            says="your BCE gradient for the logits ignores the target: in both cases x ≥ 0 and x < 0, the derivative "
                 "of the stable form depends on y too."),
    Mistake("mse_bce", "BCE target gradient with the wrong sign",
            "return d, -_reduce_grad(ctx.a, grad, ctx.reduction), None", "return d, _reduce_grad(ctx.a, grad, ctx.reduction), None",
            says="your BCE gradient for the target has the wrong sign: only one term of the stable form depends on y; "
                 "differentiate it again carefully."),
    Mistake("layer_norm", "LayerNorm over the wrong axis (the batch)",
            "axes = tuple(range(a.ndim - len(normalized_shape), a.ndim))", "axes = tuple(range(len(normalized_shape)))",
            says="your LayerNorm normalises over the leading axes (the batch): it must use the last dimensions, those "
                 "of normalized_shape."),
    Mistake("layer_norm", "unbiased variance",
            "var = _blas_mean(centered * centered, axes)",
            "var = (centered * centered).sum(axis=axes, keepdims=True) / (math.prod(normalized_shape) - 1)",
            says="your LayerNorm uses the unbiased (sample) variance: LayerNorm's variance is the plain mean of the "
                 "squared deviations."),
    Mistake("layer_norm", "backward misses the x-hat term",
            "\n                      - xhat * _blas_mean(h * xhat, axes))", ")",
            says="your LayerNorm input gradient misses the path through the variance: x reaches the output directly, "
                 "through the mean and through r, and all three paths add up."),
    Mistake("dropout", "dropout active in eval", "return dropout(x, self.p, self.training, self.generator)",
            "return dropout(x, self.p, True, self.generator)",
            says="your Dropout still drops elements after model.eval(): the module must follow its own training mode."),
    Mistake("dropout", "survivors not rescaled", "mask = keep.astype(dtype) * dtype.type(1 / (1 - p))",
            "mask = keep.astype(dtype)",
            says="the elements your dropout keeps are not scaled up, so the expected value shrinks: the survivors must "
                 "make up for the dropped ones."),
    Mistake("dropout", "keeps with probability p instead of 1 - p", "keep = _rng(generator).random(x.shape) >= p",
            "keep = _rng(generator).random(x.shape) < p",
            says="your dropout keeps about a fraction p of the elements: p is the probability of being zeroed, not of "
                 "being kept."),
    Mistake("gelu_composite", "the single-node Function called instead of primitives",
            "    u = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI\n    t = 1 - 2 / ((u * 2).exp() + 1)\n    return x * 0.5 * (t + 1)",
            "    return GELUFunction.apply(x, \"tanh\") * 1.0",
            says="your composite GELU calls the one-node Function: this exercise measures autograd's own graph, so "
                 "build it from module 03's primitives only."),
    Mistake("gelu_composite", "exp(u) instead of exp(2u)",
            "t = 1 - 2 / ((u * 2).exp() + 1)", "t = 1 - 2 / (u.exp() + 1)",
            says="your composite GELU does not match GELU: recheck the identity that writes tanh u through an "
                 "exponential; its argument is not u itself."),
    # bug kinds added for issue #14 (each must lose points on a visible test too)
    Mistake("module", "no error for a Parameter assigned before Module.__init__",
            "if isinstance(value, (Parameter, Module)):\n                raise", "if False:\n                raise",
            says="assigning a Parameter or Module before Module.__init__ has run does not raise: a subclass that "
                 "forgot to call it should get an AttributeError naming __init__."),
    Mistake("module", "a module reachable by two paths is yielded twice (no seen set)",
            "            if id(module) in seen:\n                continue\n", "",
            says="a module object assigned under two names is yielded twice by named_modules(): it should come once, "
                 "under the first name the walk reaches."),
    Mistake("module", "load_state_dict writes values before every shape is checked",
            "        if wrong:\n            raise _load_error(self, state_dict, own, [], [], wrong)\n"
            "        for name, value in state_dict.items():\n            if name in own:\n"
            "                _write(own[name], value)\n",
            "        for name, value in state_dict.items():\n            if name in own and name not in wrong:\n"
            "                _write(own[name], value)\n"
            "        if wrong:\n            raise _load_error(self, state_dict, own, [], [], wrong)\n",
            says="when one value of a state dict has the wrong shape, some parameters are already overwritten before "
                 "the error: check every entry first, then copy."),
    Mistake("linear_function", "dL/dx not reshaped back for batched inputs",
            "grad_x = (g @ weight.numpy()).reshape(x.shape) if need_x else None",
            "grad_x = g @ weight.numpy() if need_x else None",
            says="for an input with several leading dimensions, your input gradient comes back flattened to 2-D: it "
                 "must have the input's own shape."),
    Mistake("init_functions", "uniform_ ignores the generator", "_rng(generator).uniform(a, b, t.shape)",
            "_rng().uniform(a, b, t.shape)",
            says="uniform_ draws from the default generator even when one is passed, so a seeded generator does not "
                 "reproduce its numbers: draw through the one given."),
    Mistake("gelu_function", "an unknown approximate silently computes the exact GELU",
            "if approximate == \"none\":", "if True:",
            says="an approximate value other than 'none' or 'tanh' is silently computed as something instead of "
                 "raising ValueError: reject it."),
    Mistake("softmax", "softmax backward sums over the last axis whatever dim",
            "(grad * s).sum(axis=ctx.dim, keepdims=True)", "(grad * s).sum(axis=-1, keepdims=True)",
            says="your softmax backward is right only when dim is the last axis: the sum in the gradient runs along "
                 "dim, whichever axis that is."),
    Mistake("cross_entropy", "mean backward divides by every row, ignored ones included",
            "d *= grad / max(ctx.count, 1)", "d *= grad / n",
            says="with ignored rows and reduction 'mean', your loss is right but its gradient is too small: backward "
                 "must divide by the same count as forward."),
    Mistake("layer_norm", "normalises over the last axis only, whatever normalized_shape",
            "axes = tuple(range(a.ndim - len(normalized_shape), a.ndim))", "axes = (a.ndim - 1,)",
            says="your LayerNorm normalises over the last axis alone when normalized_shape has several dimensions: use "
                 "as many trailing axes as it has."),
    Mistake("layer_norm", "dL/dx ignores the weight", "h = grad if w is None else grad * w", "h = grad",
            says="your LayerNorm input gradient ignores the weight: the gradient that reaches the normalised values "
                 "was scaled by the weight on its way back."),
    Mistake("dropout", "the mask ignores the generator (numpy's global one)",
            "keep = _rng(generator).random(x.shape) >= p", "keep = np.random.random(x.shape) >= p",
            says="your dropout mask comes from numpy's global generator, so a TinyTorch generator or seed does not "
                 "make it repeatable: draw through the generator helper."),
    Mistake("dropout", "p == 1 divides by zero", "if p == 1:", "if False:",
            says="dropout with p = 1 gives nan or inf instead of zeros (a division by zero): dropping everything is a "
                 "case of its own."),
]
MISTAKES += [
    Mistake("containers", "Sequential applies its modules in reverse order",
            "        for m in self._modules.values():\n            x = m(x)\n",
            "        for m in reversed(self._modules.values()):\n            x = m(x)\n",
            says="your Sequential runs its modules last to first: each module's output feeds the next one, in the "
                 "order they were given."),
    Mistake("containers", "Sequential numbers its modules from 1",
            "            for i, m in enumerate(modules):\n", "            for i, m in enumerate(modules, start=1):\n",
            says="your Sequential names its modules from 1, so indexing and the state dict's names are off by one: "
                 "number them as Python indexes a list."),
    Mistake("containers", "a ModuleList slice is a plain list",
            "return ModuleList(items[index]) if isinstance(index, slice) else items[index]", "return items[index]",
            says="slicing your ModuleList returns a plain Python list: a slice should give a new ModuleList of those "
                 "modules, as Sequential's indexing does."),
    Mistake("linear_layers", "bias bound from out_features",
            "bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0",
            "bound = 1 / math.sqrt(self.out_features) if self.out_features > 0 else 0",
            says="your Linear draws its bias with a bound from the number of outputs: like the weight's, it depends on "
                 "the number of inputs."),
    Mistake("linear_layers", "bias drawn before the weight",
            "        kaiming_uniform_(self.weight, a=math.sqrt(5))\n        if self.bias is not None:\n"
            "            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0\n"
            "            uniform_(self.bias, -bound, bound)\n",
            "        if self.bias is not None:\n"
            "            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0\n"
            "            uniform_(self.bias, -bound, bound)\n        kaiming_uniform_(self.weight, a=math.sqrt(5))\n",
            says="your Linear draws its bias before its weight, so a seeded layer does not match PyTorch's numbers: "
                 "the order of the draws matters."),
    Mistake("linear_layers", "embedding rows picked from the flattened indices",
            "return Tensor._from_array(weight.numpy()[index])", "return Tensor._from_array(weight.numpy()[index.reshape(-1)])",
            says="your Embedding flattens the indices, so a batch of sequences gives a 2-D result: the output has the "
                 "indices' shape with the vector size after it."),
    Mistake("more_nn", "one_hot with num_classes=-1 counts max(t) classes",
            "n = int(index.max()) + 1 if num_classes == -1", "n = int(index.max()) if num_classes == -1",
            says="one_hot with num_classes=-1 makes one class too few, so the largest index has no column: classes are "
                 "numbered from 0."),
    Mistake("more_nn", "one_hot as float",
            "return Tensor._from_array((index[..., None] == np.arange(n)).astype(np.int64))",
            "return Tensor._from_array((index[..., None] == np.arange(n)).astype(np.float32))",
            says="your one_hot returns floats: PyTorch's one-hot rows are 64-bit integers."),
    Mistake("more_nn", "Flatten leaves end_dim out of the merge",
            "return x.reshape(*x.shape[:start], -1, *x.shape[end + 1:])", "return x.reshape(*x.shape[:start], -1, *x.shape[end:])",
            says="your Flatten does not merge end_dim itself: start_dim and end_dim are both included in the merged "
                 "dimensions."),
]
MISTAKES += [
    Mistake("more_nn", "nll_loss mean divides by every row, ignored ones included",
            "scale = grad if ctx.reduction != \"mean\" else grad / max(int(ctx.keep.sum()), 1)",
            "scale = grad if ctx.reduction != \"mean\" else grad / ctx.shape[0]",
            says="your nll_loss gradient under 'mean' divides by all the rows, ignored ones included: the mean is over "
                 "the kept rows only."),
    Mistake("more_nn", "pad backward reads the gradient from the start of each dimension",
            "inner = grad[tuple(slice(lo, n - hi) for (lo, hi), n in zip(ctx.grow, grad.shape))]",
            "inner = grad[tuple(slice(0, n - hi - lo) for (lo, hi), n in zip(ctx.grow, grad.shape))]",
            says="your pad backward reads the gradient from the wrong place: in the output, the input's entries come "
                 "after the padding added before them."),
]
MISTAKES += [
    Mistake("init_helpers", "fans without the receptive field", "    receptive = math.prod(t.shape[2:])\n", "    receptive = 1\n",
            says="your fans ignore the dimensions after the first two: for a weight with kernel dimensions, every "
                 "kernel position counts in both fans."),
    Mistake("init_helpers", "relu gain 2 instead of sqrt(2)", "        return math.sqrt(2.0)\n", "        return 2.0\n",
            says="your gain for relu is the factor on the variance, not the gain itself, so ReLU layers start too "
                 "wide: a gain scales the standard deviation."),
]
MISTAKES += [
    Mistake("more_nn", "one_hot accepts a class equal to num_classes (an all-zero row)", "index.max() >= n", "index.max() > n",
            says="your one_hot accepts an index equal to the number of classes and gives it an all-zero row: such an "
                 "index is out of range and must raise."),
]
