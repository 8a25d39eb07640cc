"""Catalogued mistakes of module 05_training (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("sgd", "weight decay ignored", "            g = g + group[\"weight_decay\"] * w\n", "            pass\n",
            says="your SGD ignores weight_decay: with a nonzero decay the gradient must also pull each weight toward "
                 "zero, before momentum is applied."),
    Mistake("sgd", "Nesterov ignored", "g = g + momentum * buf if group[\"nesterov\"] else buf", "g = buf",
            says="with nesterov=True your SGD steps exactly as plain momentum does: Nesterov's step looks ahead, "
                 "combining the gradient with the momentum buffer."),
    Mistake("sgd", "first momentum step damped",
            "buf = state[\"momentum_buffer\"] = np.array(g, copy=True)",
            "buf = state[\"momentum_buffer\"] = (1 - group[\"dampening\"]) * np.array(g, copy=True)",
            says="your first momentum step is scaled by the dampening: on the first step the buffer is a plain copy of "
                 "the gradient, undamped."),
    Mistake("sgd", "the momentum buffer aliases the gradient",
            "buf = state[\"momentum_buffer\"] = np.array(g, copy=True)", "buf = state[\"momentum_buffer\"] = g",
            says="your momentum buffer is the gradient's own array, so changing one changes the other: on the first "
                 "step the buffer needs an array of its own."),
    Mistake("adam", "Adam without bias correction",
            "        step /= math.sqrt(1 - beta2 ** t)", "        pass",
            says="your Adam does not bias-correct the second moment (the average of squared gradients), so early steps "
                 "are too large: it starts at 0 and needs correcting like the first."),
    Mistake("adam", "first moment not bias-corrected",
            "step *= lr / (1 - beta1 ** t)", "step *= lr",
            says="your Adam does not bias-correct the first moment (the average of gradients), so early steps are too "
                 "small: it starts at 0 and needs correcting."),
    Mistake("adam", "AdamW's weight decay inside the moments (not decoupled)",
            "            if self.decoupled:\n                w *= 1 - lr * decay\n            else:\n                g = g + decay * w",
            "            g = g + decay * w",
            says="your AdamW adds the weight decay to the gradient as Adam does: AdamW's decay is decoupled, shrinking "
                 "the weight directly, apart from the moments."),
    Mistake("adam", "decoupled decay without the learning rate", "w *= 1 - lr * decay", "w *= 1 - decay",
            says="your AdamW shrinks the weights by the whole decay at every step: the decoupled decay is scaled by "
                 "the learning rate too."),
    Mistake("adam", "eps inside the square root",
            "np.sqrt(v, out=step)\n        step /= math.sqrt(1 - beta2 ** t)  # sqrt of the bias-corrected v\n"
            "        step += eps",
            "np.sqrt(v / (1 - beta2 ** t) + eps, out=step)",
            says="your Adam puts eps under the square root, so steps for small gradients differ: compare where eps "
                 "sits in the update rule of the text."),
    Mistake("warmup_cosine", "warm-up starts at 0", "return base_lr * (step + 1) / warmup_steps",
            "return base_lr * step / warmup_steps",
            says="your warm-up gives a rate of 0 at step 0, so the first step is wasted: the warm-up should reach the "
                 "full rate on its last step, not one step later."),
    Mistake("warmup_cosine", "cosine ignores min_lr",
            "return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))",
            "return base_lr * 0.5 * (1 + math.cos(math.pi * progress))",
            says="your cosine decay ends at 0 rather than at min_lr: the cosine sweeps from the base rate down to the "
                 "minimum rate."),
    Mistake("clip_grad_norm", "per-parameter norms instead of the global norm",
            "        scale = max_norm / (total + 1e-6)\n        for g in grads:\n            g *= scale",
            "        for g in grads:\n            n = float(np.sqrt((g * g).sum()))\n            if n > max_norm:\n                g *= max_norm / (n + 1e-6)",
            says="your clipping limits each parameter's gradient on its own: the norm to compare is the global one, of "
                 "all gradients as one vector, and all are scaled alike."),
    Mistake("clip_grad_norm", "returns the clipped norm",
            "    return total\n", "    return min(total, max_norm)\n",
            says="your clip_grad_norm_ returns the norm after clipping: it reports the total norm measured before any "
                 "rescaling."),
    Mistake("batch_indices", "drop_last ignored", "stop = n - n % batch_size if drop_last else n", "stop = n",
            says="with drop_last your batches still include the short last batch: it must be left out."),
    Mistake("batch_indices", "shuffle ignored", "order = rng.permutation(n) if shuffle else np.arange(n)",
            "order = np.arange(n)",
            says="with shuffle=True your batches still come in order: draw the order from the rng given."),
    Mistake("train_epoch", "evaluate leaves dropout on (no eval mode)",
            "    was_training = model.training\n    model.eval()\n", "    was_training = model.training\n",
            says="your evaluate runs the model in training mode, so dropout is still active: switch to evaluation mode "
                 "while measuring."),
    Mistake("train_epoch", "evaluate does not restore the mode", "        model.train(was_training)", "        model.train()",
            says="your evaluate always puts the model back in training mode: restore the mode it had before, which may "
                 "have been evaluation."),
    Mistake("train_epoch", "clipping after the optimizer step",
            "        if max_norm is not None:\n            clip_grad_norm_(model.parameters(), max_norm)\n        optimizer.step()\n",
            "        optimizer.step()\n        if max_norm is not None:\n            clip_grad_norm_(model.parameters(), max_norm)\n",
            says="your train_epoch clips the gradients after the optimizer has used them, so clipping changes nothing: "
                 "clip between backward and the step."),
    Mistake("train_epoch", "average per batch, not per example",
            "total, count = total + value * len(x), count + len(x)", "total, count = total + value, count + 1",
            says="your average loss weighs every batch equally, so a short last batch counts as much as a full one: "
                 "weigh each batch by its number of examples."),
    # bug kinds added for issue #14 (each must lose points on a visible test too)
    Mistake("sgd", "w rebound instead of updated in place", "w -= group[\"lr\"] * g", "w = w - group[\"lr\"] * g",
            says="your SGD step rebinds the local name w instead of changing the parameter's array, so the weights "
                 "never move: update it in place."),
    Mistake("adam", "the first moment rebound, so the state never changes",
            "m *= beta1\n        m += (1 - beta1) * g", "m = beta1 * m + (1 - beta1) * g",
            says="your Adam rebinds the first moment's name instead of updating the stored array, so the optimizer's "
                 "state never changes: update it in place."),
    Mistake("warmup_cosine", "no floor after total_steps (the cosine climbs again)",
            "    if step > total_steps:\n        return min_lr\n", "",
            says="after total_steps your rate climbs again along the cosine: past the end of the schedule it stays at "
                 "the minimum rate."),
    Mistake("warmup_cosine", "division by zero when total_steps == warmup_steps",
            "progress = (step - warmup_steps) / span if span > 0 else 0.0", "progress = (step - warmup_steps) / span",
            says="when total_steps equals warmup_steps your schedule divides by zero: the decay then has a single "
                 "step, whose progress is 0."),
    Mistake("clip_grad_norm", "the infinity norm computed as a p-norm", "if norm_type == math.inf:", "if False:",
            says="with norm_type=inf your clipping computes a p-norm with an infinite p: the infinity norm is the "
                 "largest absolute entry, a case of its own."),
    Mistake("clip_grad_norm", "parameters without a gradient not skipped",
            "grads = [p.grad.numpy() for p in parameters if p.grad is not None]",
            "grads = [p.grad.numpy() for p in parameters]",
            says="your clipping fails on parameters whose grad is None: they have nothing to clip and must be "
                 "skipped."),
    Mistake("clip_grad_norm", "gradients below the limit rescaled too", "if total > max_norm:", "if True:",
            says="your clipping rescales gradients whose norm is already below max_norm: only a norm above the limit "
                 "calls for rescaling."),
    Mistake("batch_indices", "shuffles with numpy's global generator, not rng",
            "order = rng.permutation(n) if shuffle else np.arange(n)",
            "order = np.random.permutation(n) if shuffle else np.arange(n)",
            says="your shuffled order comes from numpy's global generator, not from the rng passed in, so a seeded rng "
                 "does not reproduce it."),
    Mistake("batch_indices", "drop_last always drops the last batch, even a full one",
            "stop = n - n % batch_size if drop_last else n", "stop = n - batch_size if drop_last else n",
            says="with drop_last, your batches lose the last batch even when it is full: only an incomplete final "
                 "batch is dropped."),
    Mistake("train_epoch", "no zero_grad: gradients accumulate across batches", "        optimizer.zero_grad()\n", "",
            says="your train_epoch never clears the gradients, so each step uses the sum of the gradients of all "
                 "batches so far."),
    Mistake("train_epoch", "train_epoch leaves a model in eval mode", "    model.train()\n    total, count = 0.0, 0\n",
            "    total, count = 0.0, 0\n",
            says="your train_epoch does not put the model in training mode, so a model left in evaluation mode trains "
                 "without dropout."),
    Mistake("train_epoch", "evaluate records the graph (no no_grad)",
            "        with no_grad():  # nothing here is recorded\n", "        if True:\n",
            says="your evaluate records a computation graph for every batch: evaluation needs no gradients, so run it "
                 "without recording."),
]
MISTAKES += [
    Mistake("optimizer", "state arrays saved without a copy",
            "state = {index[id(p)]: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}",
            "state = {index[id(p)]: dict(s)",
            says="your optimizer's state_dict holds the optimizer's own arrays, so the saved state keeps changing as "
                 "training goes on: save copies."),
    Mistake("optimizer", "parameters numbered within each group, from 0",
            "            ids = []\n            for p in group[\"params\"]:\n                index.setdefault(id(p), len(index))\n"
            "                ids.append(index[id(p)])\n",
            "            ids = list(range(len(group[\"params\"])))\n            for i, p in enumerate(group[\"params\"]):\n"
            "                index[id(p)] = i\n",
            says="your state_dict numbers the parameters from 0 in every group, so two groups share numbers: count "
                 "across all groups, in order."),
    Mistake("optimizer", "load_state_dict keeps this optimizer's own options",
            "            own.update({k: v for k, v in saved.items() if k != \"params\"})\n", "",
            says="your load_state_dict restores the state but keeps this optimizer's group options (learning rate and "
                 "the rest): take each saved group's options too."),
    Mistake("optimizer", "zero_grad ignores set_to_none=False", "                if set_to_none:\n", "                if True:\n",
            says="zero_grad(set_to_none=False) still sets the gradients to None: in that mode the existing gradients "
                 "are zeroed in place."),
    Mistake("data_loader", "shuffle ignored",
            "batch_indices(len(self.dataset), self.batch_size, self.shuffle, self.drop_last, rng)",
            "batch_indices(len(self.dataset), self.batch_size, False, self.drop_last, rng)",
            says="your DataLoader ignores its shuffle option: each epoch's batch order must follow the loader's own "
                 "options."),
    Mistake("data_loader", "len rounds down without drop_last",
            "return n // self.batch_size if self.drop_last else -(-n // self.batch_size)", "return n // self.batch_size",
            says="your DataLoader's len rounds down even without drop_last: the short last batch still counts as a "
                 "batch then."),
    Mistake("fit", "validation numbers measured on the training loader",
            "(\"train\", train_loader), (\"val\", val_loader)", "(\"train\", train_loader), (\"val\", train_loader)",
            says="your fit reports validation numbers measured on the training data: the validation loader gives "
                 "those."),
    Mistake("fit", "load_checkpoint skips the optimizer",
            "    if optimizer is not None and state[\"optimizer\"] is not None:\n        optimizer.load_state_dict(state[\"optimizer\"])\n", "",
            says="your load_checkpoint restores the model but not the optimizer, so its moments and step counts "
                 "restart: load its saved state too when there is one."),
]
MISTAKES += [
    Mistake("schedulers", "StepLR decays at every step", "return base_lr * self.gamma ** (step // self.step_size)",
            "return base_lr * self.gamma ** step",
            says="your StepLR multiplies the rate by gamma at every step: it decays once every step_size steps."),
    Mistake("schedulers", "step applies the rule before counting",
            "        self.last_step += 1\n        self._apply()\n", "        self._apply()\n        self.last_step += 1\n",
            says="your scheduler's step sets the rate of the step just finished, so the rates lag one step behind: "
                 "count the step first, then set the rates."),
]
MISTAKES += [
    Mistake("digits", "an activation after the last layer",
            "return nn.Sequential(*layers, nn.Linear(width, 10))", "return nn.Sequential(*layers, nn.Linear(width, 10), nn.ReLU())",
            says="your digits model ends with an activation: the last Linear's outputs are the logits, which the loss "
                 "takes as they are (negative ones included)."),
    Mistake("digits", "confusion matrix transposed",
            "np.add.at(counts, (np.asarray(targets), np.asarray(predictions)), 1)",
            "np.add.at(counts, (np.asarray(predictions), np.asarray(targets)), 1)",
            says="your confusion matrix is transposed: row i counts the examples whose true class is i, and the column "
                 "says what they were predicted as."),
]
MISTAKES += [
    Mistake("data_loader", "TensorDataset items hold only the first tensor",
            "return tuple(Tensor.tensor(a[index]) for a in self.arrays)", "return (Tensor.tensor(self.arrays[0][index]),)",
            says="your TensorDataset's items hold only the first tensor: an item is a tuple with one row of every "
                 "tensor given."),
    Mistake("data_loader", "default_collate concatenates instead of stacking",
            "return tuple(Tensor._from_array(np.stack([_as_numpy(v) for v in column])) for column in columns)",
            "return tuple(Tensor._from_array(np.concatenate([np.atleast_1d(_as_numpy(v)) for v in column])) for column in columns)",
            says="your default_collate joins the examples end to end, so a batch of vectors becomes one long vector: "
                 "examples are stacked along a new first axis."),
]
