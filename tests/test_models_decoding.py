"""The decoding loop: drops finished rows without changing anyone's tokens, samples per row as specified."""

from __future__ import annotations

import pytest
import torch

from debate_audit.models import GenerationParams
from debate_audit.models.decoding import Sampling, decode, next_tokens, top_p_filter


def test_top_p_keeps_the_smallest_set_reaching_p_like_transformers():
    from transformers.generation.logits_process import TopPLogitsWarper

    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    kept = torch.isfinite(top_p_filter(probs.log(), 0.8))
    assert kept.tolist() == [[False, True, False, True]]  # 0.5 + 0.3 reach 0.8
    scores = torch.randn(16, 50, generator=torch.Generator().manual_seed(0))
    for p in (0.3, 0.9, 0.99):
        assert torch.equal(top_p_filter(scores, p), TopPLogitsWarper(p)(None, scores.clone()))
    assert torch.equal(top_p_filter(scores, 1.0), scores)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sampled_frequencies_match_the_tempered_distribution(temperature):
    # 4000 rows, each its own generator: frequencies within 5 standard errors of p^(1/T) normalised.
    p = torch.tensor([0.6, 0.3, 0.1])
    n = 4000
    logits = p.log().expand(n, 3)
    tokens = next_tokens(
        logits, Sampling(temperature, 1.0, range(n)), [torch.Generator().manual_seed(s) for s in range(n)]
    )
    target = p ** (1 / temperature)
    target = target / target.sum()
    freq = torch.bincount(tokens, minlength=3).double() / n
    se = (target * (1 - target) / n).sqrt()
    assert ((freq - target).abs() <= 5 * se).all(), (freq, target)


def test_a_row_samples_the_same_tokens_whatever_else_is_in_its_batch():
    logits = torch.randn(3, 20, generator=torch.Generator().manual_seed(1))
    gens = lambda seeds: [torch.Generator().manual_seed(s) for s in seeds]  # noqa: E731
    alone = next_tokens(logits[1:2], Sampling(1.0, 0.95, [11]), gens([11]))
    together = next_tokens(logits, Sampling(1.0, 0.95, [5, 11, 7]), gens([5, 11, 7]))
    assert together[1] == alone[0]


# ----------------------------------------------------------------- the embedded model
CONVS = [
    [{"role": "user", "content": "Say hello."}],
    [{"role": "user", "content": "Explain in two sentences why the sky looks blue during the day."}],
    [{"role": "user", "content": "Name one fruit. Answer with one word."}],
    [{"role": "user", "content": "Write a short sentence about the sea."}],
]


@pytest.mark.slow
def test_batched_decoding_equals_transformers_generate_per_prompt(embedded_lm):
    lm = embedded_lm
    prompts = [lm._encode(lm.render_chat(c)) for c in CONVS]
    eos = lm._eos_ids()
    batched = decode(
        lm.model, prompts, max_new_tokens=40, eos_ids=eos, pad_id=lm.tokenizer.pad_token_id, cache_kwarg=lm._cache_kwarg
    )
    lengths = []
    for prompt, ours in zip(prompts, batched):
        ids = torch.tensor([prompt])
        ref = lm.model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=40,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=lm.tokenizer.pad_token_id,
        )
        ref = [t for t in ref[0, len(prompt) :].tolist() if t not in eos]
        assert ours == ref
        lengths.append(len(ours))
    assert min(lengths) < 40 == max(lengths)  # some rows finished early and were dropped mid-batch


@pytest.mark.slow
def test_sampled_generation_does_not_depend_on_the_batch(embedded_lm):
    params = GenerationParams(max_new_tokens=12, do_sample=True, temperature=0.9, top_p=0.95, num_samples=2, seed=3)
    together = embedded_lm.generate(CONVS[:3], params)
    alone = [embedded_lm.generate([c], params)[0] for c in CONVS[:3]]
    assert together == alone
    assert all(len(samples) == 2 for samples in together)


# ----------------------------------------------------------------- prompt prefix reuse across calls
def _states(n: int, fill: float = 0.0):
    return [(torch.full((1, 2, n, 4), fill), torch.full((1, 2, n, 4), fill)) for _ in range(3)]


def test_prefix_store_hands_out_the_longest_common_prefix_and_leaves_a_token_to_run():
    from debate_audit.models.prefix_store import PrefixStore

    store = PrefixStore(max_bytes=1 << 20, min_tokens=3)
    store.put(list(range(10)), _states(10, 1.0))
    store.put([0, 1, 2, 3, 9, 9], _states(6, 2.0))
    n, states = store.longest(list(range(8)) + [42])
    assert n == 8 and states[0][0].shape[2] == 8 and float(states[0][0].mean()) == 1.0
    assert store.longest(list(range(10)))[0] == 9  # the whole prompt is stored: one token is still run
    assert store.longest([0, 1, 7, 7, 7]) is None  # 2 common tokens < min_tokens
    assert store.longest([5, 6, 7, 8]) is None


def test_prefix_store_evicts_the_least_recently_used_within_its_budget():
    from debate_audit.models.prefix_store import PrefixStore

    one = sum(k.numel() * 4 + v.numel() * 4 for k, v in _states(10))
    store = PrefixStore(max_bytes=2 * one, min_tokens=2)
    store.put([1] * 10, _states(10))
    store.put([2] * 10, _states(10))
    assert store.longest([1] * 10 + [0]) is not None  # touch [1]*10: [2]*10 is now the oldest
    store.put([3] * 10, _states(10))
    assert len(store) == 2 and store.longest([2] * 10 + [0]) is None


@pytest.mark.slow
def test_reusing_stored_prompt_states_gives_the_same_scores_and_text(embedded_model_dir):
    from debate_audit.models import LanguageModel

    reuse = LanguageModel(embedded_model_dir, batch_size=4, cache=None)
    plain = LanguageModel(
        embedded_model_dir, batch_size=4, cache=None, model=reuse.model, tokenizer=reuse.tokenizer, prefix_store_mb=0
    )
    convs = [c + [{"role": "assistant", "content": "Sure."}] for c in CONVS]
    params = GenerationParams(max_new_tokens=12)
    first = reuse.generate(convs, params)
    longer = [c[:-1] + [{"role": "assistant", "content": "Sure. " + f[0]}] for c, f in zip(convs, first)]
    assert reuse.generate(longer, params) == plain.generate(longer, params)
    assert reuse.prefix_store.hits >= len(CONVS)
    prompts = [reuse.render_chat(c, assistant_prefix=" Answer:") for c in longer]
    hits = reuse.prefix_store.hits
    ours, ref = reuse.choice_logprobs(prompts, [" A", " B"]), plain.choice_logprobs(prompts, [" A", " B"])
    assert reuse.prefix_store.hits > hits
    assert max(abs(a - b) for r, s in zip(ours, ref) for a, b in zip(r, s)) < 1e-4
