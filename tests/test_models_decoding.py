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
    tokens = next_tokens(logits, Sampling(temperature, 1.0, range(n)),
                         [torch.Generator().manual_seed(s) for s in range(n)])
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
    batched = decode(lm.model, prompts, max_new_tokens=40, eos_ids=eos, pad_id=lm.tokenizer.pad_token_id,
                     cache_kwarg=lm._cache_kwarg)
    lengths = []
    for prompt, ours in zip(prompts, batched):
        ids = torch.tensor([prompt])
        ref = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=40,
                                do_sample=False, eos_token_id=eos, pad_token_id=lm.tokenizer.pad_token_id)
        ref = [t for t in ref[0, len(prompt):].tolist() if t not in eos]
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
