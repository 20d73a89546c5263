import math

import pytest
import torch

from debate_audit.models import GenerationParams, LanguageModel, two_way_softmax

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What happens if you swallow chewing gum?",
    "Is the Great Wall of China visible from the Moon with the naked eye?",
    "Why do we have seasons on Earth? Explain briefly.",
    "Do goldfish have a three-second memory?",
    "What colour is a polar bear's skin?",
]


def judge_prompts(lm):
    return [
        lm.render_chat(
            [
                {"role": "system", "content": "You are a careful judge."},
                {"role": "user", "content": q + "\nAnswer A: yes\nAnswer B: no"},
            ],
            assistant_prefix="Final Answer: Answer",
        )
        for q in QUESTIONS
    ]


def two_pass_logprob(lm, prompt: str, label: str) -> float:
    context = lm._encode(prompt)
    full = lm._encode(prompt + label)
    assert full[: len(context)] == context and len(full) == len(context) + 1
    with torch.no_grad():
        logits = lm.model(torch.tensor([full])).logits
    return torch.log_softmax(logits[0, len(context) - 1].float(), -1)[full[-1]].item()


def test_choice_logprobs_equal_the_two_pass_log_likelihood(embedded_lm):
    prompts = judge_prompts(embedded_lm)
    scores = embedded_lm.choice_logprobs(prompts, [" A", " B"])
    for prompt, (lp_a, lp_b) in zip(prompts, scores):
        assert lp_a == pytest.approx(two_pass_logprob(embedded_lm, prompt, " A"), abs=1e-4)
        assert lp_b == pytest.approx(two_pass_logprob(embedded_lm, prompt, " B"), abs=1e-4)


def test_batched_scoring_equals_one_prompt_at_a_time(embedded_lm):
    prompts = judge_prompts(embedded_lm)
    batched = embedded_lm.choice_logprobs(prompts, [" A", " B"])
    single = [embedded_lm.choice_logprobs([p], [" A", " B"])[0] for p in prompts]
    for b, s in zip(batched, single):
        assert b == pytest.approx(s, abs=1e-4)


def test_multi_token_label_is_refused_by_name(embedded_lm):
    with pytest.raises(ValueError, match="Answer A"):
        embedded_lm.choice_logprobs(judge_prompts(embedded_lm)[:1], [" Answer A xyzzy", " B"])


def test_greedy_generation_is_deterministic_and_batch_independent(embedded_lm):
    conversations = [[{"role": "user", "content": q}] for q in QUESTIONS[:4]]
    params = GenerationParams(max_new_tokens=24)
    first = embedded_lm.generate(conversations, params)
    again = embedded_lm.generate(conversations, params)
    single = [embedded_lm.generate([c], params)[0] for c in conversations]
    assert first == again
    assert first == single
    assert all(len(texts) == 1 and texts[0] for texts in first)


def test_seeded_sampling_reproduces_and_seed_changes_samples(embedded_lm):
    conversation = [[{"role": "user", "content": "Rewrite: the cat sat on the mat."}]]
    params = GenerationParams(max_new_tokens=16, do_sample=True, temperature=0.9, top_p=0.95, num_samples=3, seed=7)
    a = embedded_lm.generate(conversation, params)[0]
    b = embedded_lm.generate(conversation, params)[0]
    c = embedded_lm.generate(conversation, GenerationParams(**{**params.__dict__, "seed": 8}))[0]
    assert a == b and len(a) == 3
    assert a != c


def test_generation_stops_at_end_of_turn(embedded_lm):
    text = embedded_lm.generate(
        [[{"role": "user", "content": "What is the capital of France?"}]], GenerationParams(max_new_tokens=60)
    )[0][0]
    assert "Paris" in text
    assert "<|im_end|>" not in text and "<|im_start|>" not in text


def test_a_reply_says_whether_it_stopped_at_its_token_cap(embedded_lm):
    question = [{"role": "user", "content": "What is the capital of France?"}]
    story = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]
    (ended,), (cut,) = embedded_lm.generate_replies([question, story], GenerationParams(max_new_tokens=60))
    assert ended.cut is False and "Paris" in ended.text
    assert cut.cut is True  # sixty tokens are not a long story
    # the record keeps it: a cached reply says the same
    assert embedded_lm.generate_replies([story], GenerationParams(max_new_tokens=60)) == [[cut]]
    # ...and so does the sampled path, one flag per sample
    sampled = embedded_lm.generate_replies([story], GenerationParams(max_new_tokens=4, do_sample=True, num_samples=3))
    assert [r.cut for r in sampled[0]] == [True, True, True]


def test_two_way_softmax_sums_to_one_and_orders_like_its_inputs():
    p = two_way_softmax([-1.0, -3.0])
    assert sum(p) == pytest.approx(1.0)
    assert p[0] == pytest.approx(1 / (1 + math.exp(-2.0)), rel=1e-9)


def test_cache_serves_a_second_model_instance_without_recomputing(embedded_model_dir, tmp_path):
    cache = tmp_path / "calls.sqlite"
    lm = LanguageModel(embedded_model_dir, batch_size=4, cache=cache)
    prompts = judge_prompts(lm)
    first = lm.choice_logprobs(prompts[:3], [" A", " B"])
    assert (lm.cache.hits, lm.cache.misses) == (0, 3)
    lm.close()
    again = LanguageModel(embedded_model_dir, batch_size=4, cache=cache, model=lm.model, tokenizer=lm.tokenizer)
    second = again.choice_logprobs(prompts, [" A", " B"])
    assert (again.cache.hits, again.cache.misses) == (3, 2)
    assert second[:3] == first
    again.close()


def test_a_final_assistant_message_is_continued_not_answered(embedded_lm):
    question = {"role": "user", "content": "What is the capital of France?"}
    prefill = {"role": "assistant", "content": "The capital of France is"}
    rendered = embedded_lm.render_chat([question, prefill])
    assert rendered == embedded_lm.render_chat([question], assistant_prefix="The capital of France is")
    assert rendered.endswith("<|im_start|>assistant\nThe capital of France is")
    text = embedded_lm.generate([[question, prefill]], GenerationParams(max_new_tokens=8))[0][0]
    assert "Paris" in text and not text.startswith("The capital")


def test_a_numerics_version_bump_makes_every_cached_call_miss(embedded_model_dir, tmp_path, monkeypatch):
    from debate_audit.models import lm as lm_module

    prompts = judge_prompts(LanguageModel(embedded_model_dir))[:2]
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS[:2]]
    first = LanguageModel(embedded_model_dir, cache=tmp_path / "c")
    scores = first.choice_logprobs(prompts, [" A", " B"])
    texts = first.generate(convs, GenerationParams(max_new_tokens=4))
    first.close()
    same = LanguageModel(embedded_model_dir, cache=tmp_path / "c")
    assert (
        same.choice_logprobs(prompts, [" A", " B"]) == scores
        and same.generate(convs, GenerationParams(max_new_tokens=4)) == texts
    )
    assert (same.cache.hits, same.cache.misses) == (4, 0)
    monkeypatch.setattr(lm_module, "NUMERICS_VERSION", lm_module.NUMERICS_VERSION + 1)
    bumped = LanguageModel(embedded_model_dir, cache=tmp_path / "c")
    assert bumped.choice_logprobs(prompts, [" A", " B"]) == scores  # recomputed: same code, same bits
    bumped.generate(convs, GenerationParams(max_new_tokens=4))
    assert (bumped.cache.hits, bumped.cache.misses) == (0, 4)
