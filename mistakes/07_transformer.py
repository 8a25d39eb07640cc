"""Catalogued mistakes of module 07_transformer (see tinytorch_course/build/mistakes.py)."""
from tinytorch_course.build.mistakes import Mistake

MISTAKES = [
    Mistake("char_tokenizer", "byte fallback ids start at 0 (collide with characters)",
            "ids.extend(n + b for b in c.encode(\"utf-8\"))", "ids.extend(b for b in c.encode(\"utf-8\"))",
            says="your byte-fallback ids start at 0, so they collide with the ids of known characters: byte ids come "
                 "after the character ids."),
    Mistake("char_tokenizer", "unknown characters dropped",
            "            elif self.byte_fallback:\n                ids.extend(n + b for b in c.encode(\"utf-8\"))\n",
            "            elif self.byte_fallback:\n                pass\n",
            says="your encode drops characters that are not in the vocabulary: with byte fallback they are written as "
                 "their UTF-8 bytes, so any text round-trips."),
    Mistake("char_tokenizer", "decode loses trailing bytes",
            "        if pending:\n            parts.append(pending.decode(\"utf-8\", errors=\"replace\"))\n        return",
            "        return",
            says="your decode loses byte ids at the end of the sequence: a run of bytes still pending when the ids run "
                 "out must be decoded too."),
    Mistake("bpe_merge", "overlapping merges", "            i += 2\n", "            i += 1\n",
            says="your merge_pair lets occurrences of the pair overlap, so a run of repeated ids is merged wrongly: "
                 "after a replacement, move past both ids of the pair."),
    Mistake("bpe_merge", "last element dropped", "if i + 1 < n and ids[i] == a", "if i + 1 >= n:\n            break\n        if ids[i] == a",
            says="your merge_pair loses the last id when it does not start a pair: every id that is not merged is "
                 "kept, the last one included."),
    Mistake("bpe_train", "ties broken by the largest pair, not the first counted",
            "pair = max(counts, key=counts.get)", "pair = max(counts, key=lambda p: (counts[p], p))",
            says="on a tie in the counts, your training picks the largest pair: a tie goes to the pair counted first, "
                 "the one that occurs first in the sequence."),
    Mistake("bpe_train", "merges pairs that occur once", "            if counts[pair] < 2:\n                break\n", "",
            says="your training keeps merging pairs that occur only once: it stops early when no pair occurs at least "
                 "twice."),
    Mistake("bpe_train", "new ids off by one", "ids = merge_pair(ids, pair, 256 + r)", "ids = merge_pair(ids, pair, 257 + r)",
            says="your merges get ids one too high: the first merge takes the first id right after the byte ids."),
    Mistake("kv_cache", "causal mask with a cache off by one (top-left aligned)",
            "mask = np.arange(past + T)[None, :] <= past + np.arange(T)[:, None]",
            "mask = np.arange(past + T)[None, :] <= np.arange(T)[:, None]",
            says="with a cache, your mask lines the new queries up with the first keys, so they miss cached tokens: a "
                 "new query's position counts the tokens already cached."),
    Mistake("kv_cache", "cache ignored", "            k, v, past = cache.append(k, v)\n",
            "            _, _, past = cache.append(k, v)\n",
            says="your attention appends to the cache but then attends over the new keys and values only: it must "
                 "attend over all of them, the cached ones included."),
    Mistake("transformer_block", "post-LayerNorm instead of pre-LayerNorm",
            "x = x + self.drop(self.attn(self.ln1(x), cache))", "x = self.ln1(x + self.drop(self.attn(x, cache)))",
            says="your block normalises after adding the residual (post-LayerNorm): here each sub-layer sees a "
                 "normalised copy and the residual path is never normalised."),
    Mistake("transformer_block", "no residual around the MLP",
            "return x + self.drop(self.fc_out(self.act(self.fc(self.ln2(x)))))",
            "return self.drop(self.fc_out(self.act(self.fc(self.ln2(x)))))",
            says="your block's second step replaces x by the MLP's output: like the first, it is a residual update "
                 "added to x."),
    Mistake("gpt", "position embedding not added",
            "x = self.drop(self.tok(idx) + self.pos(np.arange(start, start + T)))", "x = self.drop(self.tok(idx))",
            says="your GPT adds no position embeddings, so the model cannot tell the order of the tokens."),
    Mistake("gpt", "positions restart at 0 with a cache",
            "self.pos(np.arange(start, start + T))", "self.pos(np.arange(T))",
            says="with a cache, your GPT gives the new tokens positions from 0: they come after the cached tokens, so "
                 "their positions continue from there."),
    Mistake("gpt", "no final LayerNorm", "logits = F.linear(self.ln_f(x), self.tok.weight)",
            "logits = F.linear(x, self.tok.weight)",
            says="your GPT computes the logits without the final LayerNorm after the last block."),
    Mistake("sampling", "top-k keeps k+1", "kth = np.sort(z, axis=-1)[..., -top_k, None]",
            "kth = np.sort(z, axis=-1)[..., -top_k - 1, None]",
            says="your top-k keeps one token too many: only the k largest scores survive (with any that tie the "
                 "k-th)."),
    Mistake("sampling", "top-p drops the token that crosses p", "keep_sorted = before < top_p",
            "keep_sorted = np.cumsum(sorted_p, axis=-1) < top_p",
            says="your top-p drops the token whose probability takes the sum past p: the kept prefix is the smallest "
                 "whose sum reaches p, that token included."),
    Mistake("sampling", "top-p not renormalised", "        p = np.where(keep, p, 0.0)\n        p /= p.sum(axis=-1, keepdims=True)\n",
            "        p = np.where(keep, p, 0.0)\n",
            says="after top-p your probabilities no longer sum to 1: renormalise what is kept."),
    Mistake("generate", "uncached path sees the whole sequence (no crop)",
            "                logits = model(idx[:, -model.block_size:])\n", "                logits = model(idx)\n",
            says="without a cache, your generate feeds the whole sequence to the model, which fails once it is longer "
                 "than block_size: feed only the last block_size tokens."),
    Mistake("generate", "cached path feeds the whole sequence again",
            "                logits = model(idx[:, -1:], cache=cache)", "                logits = model(idx[:, -2:], cache=cache)",
            says="with a cache, your generate feeds more than the newest token, so tokens already in the cache are "
                 "added again."),
    Mistake("get_batch", "targets not shifted", "y = np.stack([data[s + 1:s + block_size + 1] for s in starts])",
            "y = np.stack([data[s:s + block_size] for s in starts])",
            says="your targets are the inputs themselves: at every position the target is the next token."),
    Mistake("char_tokenizer", "unknown character skipped when byte_fallback=False",
            "raise KeyError(f\"character {c!r} is not in the vocabulary\")", "continue",
            says="with byte_fallback=False your encode skips unknown characters silently: such a character is a "
                 "KeyError."),
    Mistake("char_tokenizer", "byte ids decoded one at a time",
            "                pending.append(i - n)\n",
            "                parts.append(bytes([i - n]).decode(\"utf-8\", errors=\"replace\"))\n",
            says="your decode turns each byte id into text on its own, so a character of several UTF-8 bytes comes out "
                 "garbled: decode a whole run of bytes together."),
    Mistake("bpe_train", "pair counts not recomputed after a merge",
            "        for r in range(num_merges):\n            counts = Counter(zip(ids, ids[1:]))\n",
            "        counts = Counter(zip(ids, ids[1:]))\n        for r in range(num_merges):\n",
            says="your training counts the pairs once, before any merge: each merge changes the sequence, so its pairs "
                 "must be counted again."),
    Mistake("transformer_block", "cache not passed on to the attention",
            "x = x + self.drop(self.attn(self.ln1(x), cache))", "x = x + self.drop(self.attn(self.ln1(x)))",
            says="your block does not hand the cache on to its attention, so generation with a cache forgets the "
                 "earlier tokens."),
    Mistake("gpt", "token embeddings scaled by sqrt(C)", "x = self.drop(self.tok(idx) + self.pos(",
            "x = self.drop(self.tok(idx) * math.sqrt(self.tok.weight.shape[1]) + self.pos(",
            says="your GPT scales the token embeddings before adding the positions: here they are added as they are."),
    Mistake("gpt", "every block uses the first layer's cache", "cache.layers[i]", "cache.layers[0]",
            says="your GPT gives every block the first layer's cache: each block keeps its own keys and values."),
    Mistake("sampling", "top-k keeps exactly k when scores tie",
            "        kth = np.sort(z, axis=-1)[..., -top_k, None]\n        z = np.where(z < kth, -np.inf, z)\n",
            "        drop = np.argsort(z, axis=-1, kind=\"stable\")[..., :-top_k]\n        z = z.copy()\n"
            "        np.put_along_axis(z, drop, -np.inf, axis=-1)\n",
            says="your top-k keeps exactly k tokens when scores tie: every score equal to the k-th largest is kept "
                 "too."),
    Mistake("generate", "samples drawn from a fresh generator, not the one given",
            "nxt = sample(sampling_probs(last, temperature, top_k, top_p), rng)",
            "nxt = sample(sampling_probs(last, temperature, top_k, top_p), np.random.default_rng())",
            says="your generate draws its samples from a fresh generator, not from the one given, so a seeded "
                 "generation does not repeat."),
    Mistake("generate", "cache restarted only past block_size (overflows)",
            "len(cache) >= model.block_size", "len(cache) > model.block_size",
            says="with a cache, your generate starts a new cache only after the old one has gone past block_size, "
                 "which overflows the positions: restart as soon as it is full."),
    Mistake("get_batch", "start positions drawn up to len(data) - block_size inclusive",
            "starts = rng.integers(0, len(data) - block_size, size=batch_size)",
            "starts = rng.integers(0, len(data) - block_size + 1, size=batch_size)",
            says="your start positions can go one further than the text's draw allows: draw them exactly as the text "
                 "says."),
]
MISTAKES += [
    Mistake("bpe_train", "encode applies the learned pair met first in the text, not the earliest learned",
            "pair = min(set(zip(ids, ids[1:])), key=lambda p: self.ranks.get(p, math.inf))",
            "pair = next((p for p in zip(ids, ids[1:]) if p in self.ranks), None)",
            says="your encode applies whichever learned pair appears first in the text: among the pairs present, apply "
                 "the one learned earliest."),
    Mistake("bpe_train", "a merge's bytes joined in the wrong order",
            "self.vocab.append(self.vocab[a] + self.vocab[b])", "self.vocab.append(self.vocab[b] + self.vocab[a])",
            says="your vocabulary joins a merge's bytes in the wrong order: the token of the pair (a, b) is a's bytes "
                 "followed by b's."),
    Mistake("kv_cache", "old length counted after appending",
            "        past = len(self)\n        k, v = k.numpy(), v.numpy()\n",
            "        k, v = k.numpy(), v.numpy()\n        past = len(self) + k.shape[-2]\n",
            says="your LayerCache.append returns the length after appending: it returns the number of tokens that were "
                 "there before."),
    Mistake("sampling", "index counts the cumulative sums above u",
            "return np.minimum((np.cumsum(probs, axis=-1) < u).sum(axis=-1), probs.shape[-1] - 1)",
            "return np.minimum((np.cumsum(probs, axis=-1) > u).sum(axis=-1), probs.shape[-1] - 1)",
            says="your sample takes its index from the wrong side of u: recheck how inverse-CDF sampling turns the "
                 "cumulative sums and u into an index."),
    Mistake("sampling", "one u for every row", "u = rng.random(probs.shape[:-1] + (1,))", "u = rng.random()",
            says="your sample draws one u for all the rows, so they are not drawn independently: each row needs a u of "
                 "its own."),
    Mistake("train_gpt", "learning-rate schedule not applied",
            "            group[\"lr\"] = warmup_cosine(step, lr, warmup, steps, lr / 10 if min_lr is None else min_lr)\n",
            "            group[\"lr\"] = lr\n",
            says="your training loop keeps the learning rate fixed: each step first sets every group's rate from the "
                 "warm-up and cosine schedule."),
    Mistake("train_gpt", "gradients clipped after the step",
            "        grad_norm = clip_grad_norm_(model.parameters(), max_norm)\n        opt.step()\n",
            "        opt.step()\n        grad_norm = clip_grad_norm_(model.parameters(), max_norm)\n",
            says="your training loop clips after the optimizer step, so the step uses unclipped gradients: clip before "
                 "stepping."),
    Mistake("train_gpt", "gradients never zeroed (they accumulate)", "        opt.zero_grad()\n        batch_loss.backward()\n",
            "        batch_loss.backward()\n",
            says="your training loop never clears the gradients, so each step adds the new gradient to all the earlier "
                 "ones."),
    Mistake("train_gpt", "LayerNorm weights and biases decayed too",
            "decay = [p for n, p in model.named_parameters() if p.ndim == 2 and not n.startswith(\"pos.\")]\n"
            "    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and not n.startswith(\"pos.\"))]\n",
            "decay = [p for n, p in model.named_parameters() if not n.startswith(\"pos.\")]\n"
            "    rest = [p for n, p in model.named_parameters() if n.startswith(\"pos.\")]\n",
            says="your make_optimizer decays every parameter except the position table: only the 2-D weight matrices "
                 "are decayed, not biases or LayerNorm weights."),
    Mistake("train_gpt", "estimate_loss leaves the model in eval mode", "    model.train(mode)\n    return total / batches\n",
            "    return total / batches\n",
            says="your estimate_loss leaves the model in evaluation mode: restore the mode it had before."),
    Mistake("train_gpt", "unigram baseline without add-one smoothing",
            "counts = np.bincount(train_data, minlength=vocab_size) + 1.0", "counts = np.bincount(train_data, minlength=vocab_size) + 0.0",
            says="your unigram baseline gives a token never seen in training a probability of 0 (an infinite loss): "
                 "smooth the counts by one."),
]
MISTAKES += [
    Mistake("char_tokenizer", "vocabulary in order of first occurrence, not sorted",
            "self.chars = sorted(set(text)) if chars is None else list(chars)",
            "self.chars = list(dict.fromkeys(text)) if chars is None else list(chars)",
            says="your vocabulary numbers the characters in the order they first appear in the text: they are numbered "
                 "in sorted order."),
    Mistake("gpt", "residual projections not scaled down with depth",
            "init.normal_(p, 0.0, 0.02 * (depth_scale if scaled else 1.0))", "init.normal_(p, 0.0, 0.02)",
            says="your reset_parameters draws the last layer of each residual branch like the other matrices: those "
                 "are scaled down with the depth."),
]
MISTAKES += [
    Mistake("transformer_block", "exact GELU instead of the tanh approximation",
            "self.act = GELU(approximate=\"tanh\")", "self.act = GELU()",
            says="your block uses the exact GELU: GPT-2's blocks use its tanh approximation."),
]
MISTAKES += [
    Mistake("gpt", "blocks kept in a plain list (their parameters unregistered)",
            "self.blocks = ModuleList([TransformerBlock(n_embd, n_head, 4, dropout) for _ in range(n_layer)])",
            "self.blocks = [TransformerBlock(n_embd, n_head, 4, dropout) for _ in range(n_layer)]",
            says="your GPT keeps its blocks in a plain Python list, so their parameters are not registered (neither "
                 "trained nor saved): hold them in a container module."),
]
MISTAKES += [
    Mistake("train_gpt", "estimate_loss runs in training mode (dropout on)",
            "    model.eval()\n    for _ in range(batches):", "    for _ in range(batches):",
            says="your estimate_loss runs the model in training mode, so dropout is on while measuring: switch to "
                 "evaluation mode first."),
]
