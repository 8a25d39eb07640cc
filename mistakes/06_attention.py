"""Catalogued mistakes of module 06_attention (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("attention_bias", "causal mask off by one (the diagonal masked)",
            "allowed = np.arange(S)[None, :] <= np.arange(L)[:, None]",
            "allowed = np.arange(S)[None, :] < np.arange(L)[:, None]",
            says="your causal mask hides each position from itself: a query may attend to its own key as well as the "
                 "earlier ones."),
    Mistake("attention_bias", "causal mask off by one (one future key visible)",
            "allowed = np.arange(S)[None, :] <= np.arange(L)[:, None]",
            "allowed = np.arange(S)[None, :] <= np.arange(L)[:, None] + 1",
            says="your causal mask lets each query see one key of its future: a query may attend only up to its own "
                 "position."),
    Mistake("attention_bias", "boolean mask inverted",
            "        return np.where(mask, 0, -np.inf).astype(dtype)",
            "        return np.where(mask, -np.inf, 0).astype(dtype)",
            says="your boolean mask is read the wrong way round: True marks a key that may be attended, False one that "
                 "is masked out."),
    Mistake("attention_function", "missing 1/sqrt(d) scale", "        s *= scale\n", "",
            says="your attention forward does not scale the scores: apply the scale it is given before the softmax."),
    Mistake("attention_function", "mask applied after the softmax",
            "        if bias is not None:\n"
            "            s = s + bias if np.broadcast_shapes(s.shape, bias.shape) != s.shape else _add_in_place(s, bias)\n"
            "        s = _softmax_last(s)\n",
            "        s = _softmax_last(s)\n        if bias is not None:\n"
            "            s = s * (bias == 0)\n",
            says="your mask is applied after the softmax, so the remaining weights no longer sum to 1: the bias "
                 "belongs on the scores, before normalising."),
    Mistake("attention_function", "softmax without the max subtraction (overflows)",
            "        s = _softmax_last(s)\n", "        np.exp(s, out=s)\n        s *= 1 / s.sum(axis=-1, keepdims=True)\n",
            says="your attention's softmax overflows (inf or nan) for large scores: shift each row of scores before "
                 "exponentiating."),
    Mistake("attention_function", "softmax backward without the row-sum term",
            "        dp -= p * _blas_sum(dp, (-1,), keepdims=True)\n", "",
            says="your attention backward drops the softmax's row-sum term: each weight of a row depends on every "
                 "score of that row."),
    Mistake("attention_function", "key gradient without the scale",
            "        ds *= ctx.scale\n        grad_q = np.matmul(ds, ka)\n",
            "        grad_q = np.matmul(ds, ka) * ctx.scale\n",
            says="your key gradient misses the scale that your query gradient has: both come from the scaled scores, "
                 "so both carry it."),
    Mistake("attention_function", "dropout mask ignored in backward",
            "        if ctx.mask is not None:\n            dp *= ctx.mask\n", "",
            says="with dropout, your backward ignores the dropout mask on the way to the scores: a dropped weight did "
                 "not reach the output, so its gradient is 0."),
    Mistake("mha", "heads merged in the wrong order",
            "return x.transpose(1, 2).reshape(B, T, H * d)", "return x.permute(0, 2, 3, 1).reshape(B, T, H * d)",
            says="your merge of the heads puts the numbers in the wrong order: each position's output is its heads' "
                 "vectors, one after the other."),
    Mistake("mha", "q, k, v split from the wrong layout",
            "parts = qkv.view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)",
            "parts = qkv.view(B, T, self.num_heads, 3, self.head_dim).permute(3, 0, 2, 1, 4)",
            says="your split reads q, k and v from the wrong layout: the projection's output holds all of q, then all "
                 "of k, then all of v, each cut into heads."),
    Mistake("mha", "dropout also in eval mode", "p = self.dropout if self.training else 0.0", "p = self.dropout",
            says="your attention layer still drops weights after model.eval(): dropout applies in training mode only."),
    Mistake("mha", "causal flag ignored", "is_causal=self.causal and attn_mask is None,", "is_causal=False,",
            says="your layer ignores causal=True, so positions see their future: pass causality on when no mask is "
                 "given."),
    Mistake("sinusoidal", "sin and cos swapped",
            "    pe[:, 0::2] = np.sin(pos * freq)\n    pe[:, 1::2] = np.cos(pos * freq)",
            "    pe[:, 0::2] = np.cos(pos * freq)\n    pe[:, 1::2] = np.sin(pos * freq)",
            says="your encoding swaps sine and cosine between the even and the odd columns."),
    Mistake("sinusoidal", "exponent i/d instead of 2i/d",
            "freq = 10000.0 ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)",
            "freq = 10000.0 ** (-np.arange(0, dim // 2, dtype=np.float64) / dim)",
            says="your frequencies fall too slowly across the columns: recheck the exponent of 10000 for the pair of "
                 "columns 2i and 2i+1."),
    Mistake("attention_bias", "float mask treated as a boolean mask",
            "    if mask.dtype == np.bool_:\n        return np.where(mask, 0, -np.inf).astype(dtype)\n"
            "    return mask.astype(dtype, copy=False)\n",
            "    return np.where(mask, 0, -np.inf).astype(dtype)\n",
            says="your float mask is turned into 0 and -inf as if it were boolean: a float mask is added to the scores "
                 "as it is."),
    Mistake("attention_bias", "causal triangle aligned at the bottom right (j <= i + S - L)",
            "allowed = np.arange(S)[None, :] <= np.arange(L)[:, None]",
            "allowed = np.arange(S)[None, :] <= np.arange(L)[:, None] + (S - L)",
            says="with more keys than queries your causal triangle is shifted: query i may see the keys up to position "
                 "i, counted from the first key."),
    Mistake("attention_function", "a given scale ignored (always 1/sqrt(d))",
            "        s *= scale\n", "        s *= 1 / math.sqrt(qa.shape[-1])\n",
            says="your attention ignores the scale it is passed and always uses its own: a given scale replaces the "
                 "default."),
    Mistake("attention_function", "row maximum taken before the mask is added (large masked scores)",
            "        if bias is not None:\n"
            "            s = s + bias if np.broadcast_shapes(s.shape, bias.shape) != s.shape else _add_in_place(s, bias)\n"
            "        s = _softmax_last(s)\n",
            "        s -= s.max(axis=-1, keepdims=True)\n        if bias is not None:\n"
            "            s = s + bias if np.broadcast_shapes(s.shape, bias.shape) != s.shape else _add_in_place(s, bias)\n"
            "        np.exp(s, out=s)\n        s *= 1 / s.sum(axis=-1, keepdims=True)\n",
            says="your softmax takes each row's maximum before the mask is added, so a large masked score can wipe out "
                 "the row: add the mask first."),
    Mistake("attention_function", "value gradient without the dropout mask",
            "grad_v = np.matmul(np.swapaxes(pd, -1, -2), grad)", "grad_v = np.matmul(np.swapaxes(p, -1, -2), grad)",
            says="with dropout, your value gradient uses the weights before dropout: in forward the values were "
                 "multiplied by the dropped-out weights."),
    Mistake("mha", "attn_mask not passed on to the attention",
            "return scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,",
            "return scaled_dot_product_attention(q, k, v, attn_mask=None,",
            says="your layer ignores the attn_mask it is given: hand it on to the attention."),
    Mistake("sinusoidal", "positions counted from 1",
            "pos = np.arange(num_positions, dtype=np.float64)[:, None]",
            "pos = np.arange(1, num_positions + 1, dtype=np.float64)[:, None]",
            says="your encoding numbers the positions from 1: the first row is position 0."),
]
MISTAKES += [
    Mistake("sdpa", "dropout keeps not rescaled by 1/(1-p)",
            "mask = keep.astype(dtype) * dtype.type(1 / (1 - dropout_p))", "mask = keep.astype(dtype)",
            says="your attention dropout does not rescale the weights it keeps, so the expected output shrinks: "
                 "inverted dropout scales the survivors."),
    Mistake("sdpa", "default scale 1/d instead of 1/sqrt(d)",
            "scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale",
            "scale = 1 / query.shape[-1] if scale is None else scale",
            says="your default scale shrinks the scores too much: recheck the default in the text, which depends on "
                 "the query's last size through a square root."),
    Mistake("sdpa", "kept entries drawn as random < p",
            "keep = _rng(generator).random(shape) >= dropout_p", "keep = _rng(generator).random(shape) < 1 - dropout_p",
            says="your dropout keeps the right share of weights but not the entries the text's draw keeps, so a "
                 "replayed generator disagrees: use exactly the comparison given."),
    Mistake("select", "gradient written into every slice", "        full[ctx.i] = grad\n", "        full[...] = grad\n",
            says="your Select backward gives every slice the incoming gradient: only the selected slice reached the "
                 "output, the others get 0."),
    Mistake("select", "zeros in C order, not laid out as x (a copy further back)",
            "        full = np.zeros_like(ctx.inputs[0]._numpy(), dtype=grad.dtype)",
            "        full = np.zeros(ctx.inputs[0].shape, grad.dtype)",
            says="your Select backward's zeros are laid out in plain row order, not as x is in memory, so a copy "
                 "happens further back: lay them out like x's array."),
    Mistake("mha", "output projection skipped",
            "out = self.proj(self.merge_heads(self.attend(q, k, v, attn_mask)))",
            "out = self.merge_heads(self.attend(q, k, v, attn_mask))",
            says="your layer's output skips the final projection: the merged heads still go through the output layer."),
    Mistake("mha", "weights drawn without the causal mask",
            "weights = attention_weights(q, k, attn_mask, self.causal and attn_mask is None)",
            "weights = attention_weights(q, k, attn_mask)",
            says="the attention weights your causal layer returns ignore causality, though its output respects it: "
                 "compute them with the same masking."),
    Mistake("positions", "learned positions ignore start",
            "return x + self.embedding(np.arange(start, start + T))", "return x + self.embedding(np.arange(T))",
            says="your learned positions always start at 0: with tokens already seen (start > 0), the positions "
                 "continue from start."),
    Mistake("positions", "sinusoidal rows taken from the end of the table",
            "return x + self.pe[:x.shape[-2]]", "return x + self.pe[-x.shape[-2]:]",
            says="your sinusoidal layer adds the last rows of the table: an input of length T takes its first T rows."),
]
MISTAKES += [
    Mistake("sdpa", "attention_weights without the scale",
            "s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)",
            "s = np.matmul(q, np.swapaxes(k, -1, -2))",
            says="your attention_weights does not scale the scores, so the weights it pictures differ from those the "
                 "attention uses."),
]
MISTAKES += [
    Mistake("mha", "output projection always with a bias",
            "        self.proj = Linear(embed_dim, embed_dim, bias=bias)\n", "        self.proj = Linear(embed_dim, embed_dim)\n",
            says="your output projection has a bias even with bias=False: both of the layer's projections follow the "
                 "bias option."),
    Mistake("sdpa", "key and value positions not compared",
            "query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]", "query.shape[-1] != key.shape[-1]",
            says="your checks accept a key and a value with different numbers of positions: each key needs its value, "
                 "so those counts must match."),
    Mistake("sdpa", "a float mask that requires grad gets no gradient",
            "    if isinstance(attn_mask, Tensor) and attn_mask.requires_grad and is_grad_enabled():", "    if False:",
            says="a float mask that requires grad gets no gradient from your attention: in that case compute the same "
                 "attention from recorded operations."),
    Mistake("mha", "a width the heads do not divide accepted",
            "        if embed_dim % num_heads:\n            raise ValueError", "        if False:\n            raise ValueError",
            says="your layer accepts a width that the number of heads does not divide: such a layer cannot be built "
                 "and is refused with a ValueError."),
    Mistake("two_tasks", "attention not causal",
            "self.att = MultiHeadAttention(C, H, causal=True)", "self.att = MultiHeadAttention(C, H)",
            says="your TwoTasks model's attention is not causal, so each position can look ahead at later tokens."),
    Mistake("two_tasks", "positions not added",
            "x = self.tok(ids) + self.pos(np.arange(ids.shape[1]))", "x = self.tok(ids)",
            says="your TwoTasks model adds no position embeddings, so the attention cannot tell where each token is."),
    Mistake("attention_cost", "memory read after the output is freed",
            "    held = tracemalloc.get_traced_memory()[0]\n    tracemalloc.stop()\n    del out\n",
            "    del out\n    held = tracemalloc.get_traced_memory()[0]\n    tracemalloc.stop()\n",
            says="your attention_cost measures memory after the output is released, when the graph is already gone: "
                 "read it while the output still lives."),
]
MISTAKES += [
    Mistake("attention_cost", "only the forward pass timed",
            "scaled_dot_product_attention(q, k, v, is_causal=True).backward(ones)", "scaled_dot_product_attention(q, k, v, is_causal=True)",
            says="your attention_cost times the forward pass only: each timed run includes the backward too."),
]
