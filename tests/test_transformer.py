"""Library tests of tinytorch.transformer: tokenizers (hypothesis), gradients, causality, the KV
cache, exact resume, and a shortened training run that must beat the unigram baseline."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tinytorch.autograd import Tensor, gradcheck, no_grad
from tinytorch.nn import Parameter
from tinytorch.tensor_base import Generator, manual_seed
from tinytorch.transformer import (GPT, BPETokenizer, CharTokenizer, KVCache, TransformerBlock, generate,
                                   python_corpus, train_gpt, unigram_loss)

CORPUS = "def f(self, x):\n    return self.x + x  # ✓\n\nclass A:\n    pass\n" * 4
BPE = BPETokenizer.train(CORPUS, 30)
CHARS = CharTokenizer(CORPUS)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenizers_round_trip_any_text(text):
    assert CHARS.decode(CHARS.encode(text)) == text
    assert BPE.decode(BPE.encode(text)) == text
    assert all(0 <= i < BPE.vocab_size for i in BPE.encode(text))
    assert all(0 <= i < CHARS.vocab_size for i in CHARS.encode(text))


def test_tokenizers_save_and_load(tmp_path):
    CHARS.save(tmp_path / "c.json")
    BPE.save(tmp_path / "b.json")
    text = "return self.é"
    assert CharTokenizer.load(tmp_path / "c.json").encode(text) == CHARS.encode(text)
    assert BPETokenizer.load(tmp_path / "b.json").encode(text) == BPE.encode(text)


def float64(module):
    """Convert a module's parameters to float64 (for finite differences)."""
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            setattr(m, name, Parameter(Tensor.tensor(p.detach().numpy().astype(np.float64))))
    return module


def test_block_gradcheck():
    manual_seed(0)
    block = float64(TransformerBlock(8, 2, mlp_ratio=2))
    x = Tensor.tensor(np.random.default_rng(0).standard_normal((2, 3, 8)), requires_grad=True)
    w = block.fc.weight
    assert gradcheck(lambda x, w: block(x), [x, w])


def small_gpt(seed=0, **kw):
    manual_seed(seed)
    config = dict(vocab_size=17, block_size=12, n_layer=2, n_head=2, n_embd=16) | kw
    return GPT(**config)


def test_gpt_is_causal():
    gpt = small_gpt()
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 17, size=(2, 12))
    base = gpt(ids).detach().numpy()
    for t in range(1, 12):
        changed = ids.copy()
        changed[:, t:] = rng.integers(0, 17, size=changed[:, t:].shape)
        np.testing.assert_allclose(gpt(changed).detach().numpy()[:, :t], base[:, :t], atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"top_k": 3}, {"top_p": 0.8, "temperature": 0.7}])
def test_cached_and_uncached_generation_agree(kwargs):
    gpt = small_gpt(2)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    a, la = generate(gpt, prompt, 9, generator=Generator(5), return_logits=True, **kwargs)
    b, lb = generate(gpt, prompt, 9, generator=Generator(5), use_cache=False, return_logits=True, **kwargs)
    assert np.array_equal(a, b)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(x, y, atol=1e-5)


def test_kv_cache_positions_continue():
    gpt = small_gpt(3)
    ids = np.random.default_rng(2).integers(0, 17, size=(1, 10))
    cache = KVCache(2)
    with no_grad():  # a cache serves generation: nothing in it is recorded
        parts = [gpt(ids[:, s:e], cache=cache).numpy() for s, e in [(0, 4), (4, 5), (5, 10)]]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), gpt(ids).detach().numpy(), atol=1e-5)
    with pytest.raises(ValueError):
        gpt(ids[:, :3], cache=cache)  # 13 positions > block size 12


def test_checkpoint_resumes_exactly(tmp_path):
    data = np.random.default_rng(0).integers(0, 17, size=2000)
    kwargs = dict(batch_size=4, warmup=2, eval_every=3, eval_batches=1, progress=False, log=None)
    straight = small_gpt(4)
    h1 = train_gpt(straight, data, data, steps=6, **kwargs)
    ckpt = tmp_path / "gpt.pkl"
    first = small_gpt(4)
    train_gpt(first, data, data, steps=6, time_budget=0.0, checkpoint=ckpt, **kwargs)  # stops after 1 step
    resumed = small_gpt(99)
    h2 = train_gpt(resumed, data, data, steps=6, checkpoint=ckpt, resume=True, **kwargs)
    assert h2["step"] == h1["step"]
    np.testing.assert_allclose(h2["loss"], h1["loss"], rtol=1e-6)
    for (name, p), (_, q) in zip(straight.named_parameters(), resumed.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)


def test_shortened_training_beats_the_unigram_baseline():
    """CI's training run: a small model, a few hundred steps on the standard library's source."""
    train_text, val_text = python_corpus(max_chars=400_000)
    tok = CharTokenizer(train_text, byte_fallback=False)
    train = np.array(tok.encode(train_text), dtype=np.int64)
    val = np.array(tok.encode(val_text), dtype=np.int64)
    manual_seed(0)
    model = GPT(tok.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=48)
    history = train_gpt(model, train, val, steps=300, batch_size=16, lr=1e-2, warmup=20, eval_every=300,
                        eval_batches=8, progress=False, log=None)
    baseline = unigram_loss(train, val, tok.vocab_size)
    assert history["val_loss"][-1] < baseline - 0.4, (history["val_loss"][-1], baseline)
