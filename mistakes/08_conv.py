"""Catalogued mistakes of module 08_conv (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("window_layout", "output size ignores dilation",
            "oh = (h - dh * (kh - 1) - 1) // th + 1", "oh = (h - (kh - 1) - 1) // th + 1",
            says="the number of windows ignores the dilation, so dilated kernels get too many windows and some "
            "reach past the input: a dilated kernel spans more than its number of taps."),
    Mistake("window_layout", "output size off by one (the last window's end counted one past it)",
            "ow = (w - dw * (kw - 1) - 1) // tw + 1", "ow = (w - dw * (kw - 1)) // tw + 1",
            says="the output width counts the kernel's extent one element short, so a last window can hang past "
            "the right edge: the extent runs from the first tap to the last, both included."),
    Mistake("window_layout", "the window strides forget the stride",
            "(sn, sc, sh * th, sw * tw, sh * dh, sw * dw)", "(sn, sc, sh, sw, sh * dh, sw * dw)",
            says="moving to the next window moves by one element whatever the stride: the windows' strides must "
            "include how far the kernel jumps between windows."),
    Mistake("window_layout", "the tap strides forget the dilation",
            "(sn, sc, sh * th, sw * tw, sh * dh, sw * dw)", "(sn, sc, sh * th, sw * tw, sh, sw)",
            says="neighbouring taps of a window are read side by side whatever the dilation: the taps' strides "
            "must include the gap between taps."),
    Mistake("window_layout", "height and width strides swapped",
            "(sn, sc, sh * th, sw * tw, sh * dh, sw * dw)", "(sn, sc, sw * tw, sh * th, sw * dw, sh * dh)",
            says="the window view steps along columns where it should step along rows, and back: check which of "
            "the input's strides belongs to height and which to width."),
    Mistake("window_layout", "no error when not one window fits",
            "if oh <= 0 or ow <= 0:", "if False:",
            says="window_layout returns an empty or negative output size when the kernel does not fit in the "
            "(padded) input even once: that must raise an error."),
    Mistake("conv2d_function", "cols rows in (p, q, c) order, the weight in (c, p, q)",
            "view.transpose(1, 4, 5, 2, 3, 0)", "view.transpose(4, 5, 1, 2, 3, 0)",
            says="the rows of cols are ordered tap position first, but the reshaped weight's columns run channel "
            "first: the two orders must match, or inputs meet the wrong weights."),
    Mistake("conv2d_function", "a true convolution: the kernel flipped",
            "out = w.reshape(o, c * kh * kw) @ cols", "out = w[:, :, ::-1, ::-1].reshape(o, c * kh * kw) @ cols",
            says="your forward flips the kernel (a true convolution): PyTorch's conv2d computes a "
            "cross-correlation, with the kernel as it is."),
    Mistake("conv2d_function", "bias forgotten",
            "        if bias is not None:\n            out += bias.numpy()[:, None]\n", "",
            says="conv2d leaves the bias out: each output channel has a bias value to add to every one of its "
            "outputs."),
    Mistake("conv2d_function", "the product read with the images first, not last as in cols",
            "out = out.reshape(o, oh, ow, n).transpose(3, 0, 1, 2)", "out = out.reshape(n, o, oh, ow)",
            says="the product's columns are read back as if the images came first, so images and positions get "
            "mixed up: the columns run over the windows with the image last."),
    Mistake("conv2d_function", "cols with the images first: a column per (n, i, j)",
            "view.transpose(1, 4, 5, 2, 3, 0).reshape(c * kh * kw, oh * ow * n)",
            "view.transpose(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, oh * ow * n)",
            says="cols lists its columns with the image first, while the product is read back with the image last: "
            "build cols in the order the exercise asks for."),
    Mistake("conv2d_backward", "overlapping windows overwrite the input gradient instead of adding to it",
            "windows[:, :, :, :, p, q] += grad_cols", "windows[:, :, :, :, p, q] = grad_cols",
            says="overlapping windows overwrite each other's contributions to the input gradient: an input element "
            "read by several windows must receive the sum."),
    Mistake("conv2d_backward", "output gradient with the images first, not last as in cols",
            "g = grad.transpose(1, 2, 3, 0).reshape(o, oh * ow * n)",
            "g = grad.transpose(1, 0, 2, 3).reshape(o, oh * ow * n)",
            says="the output gradient is arranged with the images first, while cols has them last: arrange it in "
            "the same column order as the forward's product."),
    Mistake("conv2d_backward", "bias gradient is a mean",
            "grad_b = g.sum(axis=1) if need_b else None", "grad_b = g.mean(axis=1) if need_b else None",
            says="the bias gradient is a mean over the positions and images: each bias value was added to every "
            "output of its channel, so their gradients add up."),
    Mistake("conv2d_backward", "padding cut from the wrong side of the input gradient",
            "grad_x = _unpad(grad_padded, ctx.padding)", "grad_x = grad_padded[:, :, :x.shape[2], :x.shape[3]]",
            says="the padding is cut from one side of the input gradient only: it was added on both sides, so the "
            "gradient must lose it on both."),
    Mistake("max_pool", "ties: the gradient goes to the last maximum",
            "wins = tap > out", "wins = tap >= out",
            says="on a tie, the gradient goes to the last maximum of the window: PyTorch picks the first in "
            "row-major order, so the comparison must keep the earlier tap."),
    Mistake("max_pool", "the running maximum is never updated",
            "            np.maximum(out, tap, out=out)", "            pass",
            says="max pooling keeps the first tap's values: the running maximum must be updated as each tap is "
            "compared with it."),
    Mistake("max_pool", "max pooling pads with zeros",
            "padded = _pad(a, padding, -np.inf)", "padded = _pad(a, padding, 0.0)",
            says="max pooling pads with zeros, so a window of negative numbers can return 0 from its padding: "
            "padding must never win a maximum."),
    Mistake("max_pool", "overlapping windows overwrite each other's gradient",
            "windows[:, :, :, :, p, q] += np.where(chosen == k, grad, 0)",
            "windows[:, :, :, :, p, q] = np.where(chosen == k, grad, 0)",
            says="with overlapping pooling windows (a stride below the kernel size), a later window's gradient "
            "overwrites an earlier one's: gradients that reach the same element add up."),
    Mistake("avg_pool", "count_include_pad ignored",
            "elif count_include_pad:", "elif True:",
            says="average pooling divides by the kernel's area even with count_include_pad=False: then only the "
            "real elements of each window count, fewer at the border."),
    Mistake("avg_pool", "backward forgets the divisor",
            "share = grad / ctx.divisor", "share = grad",
            says="average pooling's backward hands each window's whole gradient to its elements: each element "
            "contributed only its share of the mean."),
    Mistake("avg_pool", "divisor_override ignored",
            "if divisor_override:", "if False:",
            says="average pooling ignores divisor_override: when it is given, it replaces the divisor."),
    Mistake("bn_function", "training gradient treats the batch statistics as constants",
            "if ctx.batch_stats:  # mean and var are functions of x too", "if False:",
            says="batch norm's training gradient treats the batch mean and variance as constants: in training they "
            "are functions of x too, and their gradient must flow."),
    Mistake("bn_function", "the batch formula applied to fixed statistics",
            "if ctx.batch_stats:  # mean and var are functions of x too", "if True:",
            says="batch norm's backward with fixed (running) statistics uses the training formula: in evaluation "
            "mean and variance are constants, so the op is an affine map per channel."),
    Mistake("bn_function", "backward misses the x-hat term",
            " - xhat * _per_channel_mean(h * xhat, keepdims=True))", ")",
            says="the training backward of batch norm misses the term that flows through the batch variance: the "
            "variance depends on every value of its channel too."),
    Mistake("bn_functional", "running variance is the biased one",
            "momentum * var * count / (count - 1))", "momentum * var)",
            says="the running variance is updated with the batch's biased variance: PyTorch updates it with the "
            "unbiased one, an estimate for the whole data set."),
    Mistake("bn_functional", "momentum weighs the old value",
            "(1 - momentum) * running_mean.numpy() + momentum * mean",
            "momentum * running_mean.numpy() + (1 - momentum) * mean",
            says="momentum weighs the old running value instead of the new batch: in PyTorch momentum is the "
            "weight of the batch."),
    Mistake("bn_functional", "the batch normalised with its unbiased variance",
            "var = _per_channel_mean(np.square(a - mean))", "var = _per_channel_mean(np.square(a - mean)) * count / (count - 1)",
            says="the batch is normalised with its unbiased variance: PyTorch normalises with the biased one and "
            "keeps the unbiased one for the running statistics."),
    Mistake("conv2d_module", "kaiming_uniform_ without a=sqrt(5)",
            "kaiming_uniform_(self.weight, a=math.sqrt(5))", "kaiming_uniform_(self.weight)",
            says="the initial weights spread wider than PyTorch's: Conv2d follows nn.Linear's default, which "
            "passes a particular a to kaiming_uniform_."),
    Mistake("conv2d_module", "bias fan_in forgets the kernel's taps",
            "fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]", "fan_in = self.in_channels",
            says="the initial bias range is too wide: a kernel's fan-in counts every weight that meets one output "
            "element, its taps as well as its input channels."),
    Mistake("bn_module", "batch statistics in eval mode (the classic bug)",
            "use_batch = self.training or not self.track_running_stats", "use_batch = True",
            says="BatchNorm2d normalises with the batch's statistics in evaluation too: eval mode uses the running "
            "statistics, so that an example's output does not depend on its batch."),
    Mistake("bn_module", "momentum=None treated as momentum 0",
            "                factor = 1.0 / self.num_batches_tracked.item()\n", "                pass\n",
            says="momentum=None leaves the running statistics where they started: None means a cumulative average, "
            "in which every batch so far weighs the same."),
    Mistake("bn_module", "running statistics updated in eval mode too",
            "if self.training and self.track_running_stats:", "if self.track_running_stats:",
            says="BatchNorm2d counts batches in evaluation too (num_batches_tracked grows): eval mode must change "
            "no state at all."),
]
MISTAKES += [
    Mistake("bn_module", "track_running_stats=False still counts batches (there is no counter)",
            "if self.training and self.track_running_stats:", "if self.training:",
            says="with track_running_stats=False, training still counts batches, but there is no counter: without "
            "running statistics there is nothing to track."),
    Mistake("bn_module", "track_running_stats=False in eval mode reads running statistics that do not exist",
            "use_batch = self.training or not self.track_running_stats", "use_batch = self.training",
            says="with track_running_stats=False, evaluation reads running statistics that do not exist: without "
            "them, every mode uses the batch's statistics."),
]
