"""The optimised model paths give the simple path's answers: prefix-cache scoring, de-duplication,
out-of-memory back-off, batched greedy generation; and the batch planner covers every prompt once."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_llama

from debate_audit.models import GenerationParams, LanguageModel
from debate_audit.models.batching import common_prefix, plan_batches

# Tests that load the embedded model take it from conftest's `embedded_model_dir` (prepared on first use).
needs_model = pytest.mark.slow


# ------------------------------------------------------------------------------------------ planner
def _plan_seqs() -> dict[int, list[int]]:
    system = list(range(100, 130))  # 30 shared tokens (system message)
    story_a, story_b = list(range(500, 560)), list(range(700, 760))
    seqs = {}
    for k in range(6):
        seqs[k] = system + story_a + [900 + k] * (k + 1)
    for k in range(6, 10):
        seqs[k] = system + story_b + [900 + k] * (k + 2)
    seqs[10] = system + [42] * 20
    seqs[11] = system + [43] * 5
    seqs[12] = [7, 8, 9]  # shares nothing
    return seqs


def test_plan_covers_every_prompt_once_within_limits():
    seqs = _plan_seqs()
    plan = plan_batches(seqs, batch_size=4, max_tokens=40, min_prefix=16, min_extra=32)
    items = [i for b in plan for i in b.items]
    assert sorted(items) == sorted(seqs)
    for batch in plan:
        assert len(batch.items) <= 4
        widths = [len(seqs[i]) - batch.prefix for i in batch.items]
        assert min(widths) >= 1  # the answer slot always goes through the batch pass
        assert len(batch.items) == 1 or len(batch.items) * max(widths) <= 40
        assert all(common_prefix(seqs[batch.items[0]], seqs[i]) >= batch.prefix for i in batch.items)


def test_plan_shares_the_story_within_a_story_group_and_the_system_message_elsewhere():
    seqs = _plan_seqs()
    plan = plan_batches(seqs, batch_size=8, min_prefix=16, min_extra=32)
    prefix_of = {i: b.prefix for b in plan for i in b.items}
    assert all(prefix_of[k] == 30 + 60 for k in range(6))  # system + story A
    assert all(prefix_of[k] == 30 + 60 for k in range(6, 10))  # system + story B
    assert prefix_of[10] == prefix_of[11] == 30  # only the system message in common
    assert prefix_of[12] == 0


def test_plan_sorts_a_group_by_length_longest_first():
    seqs = {i: [1] * 20 + [2] * n for i, n in enumerate([3, 9, 1, 7, 5])}
    plan = plan_batches(seqs, batch_size=2, min_prefix=16)
    lengths = [len(seqs[i]) for b in plan for i in b.items]
    assert lengths == sorted(lengths, reverse=True)


# ----------------------------------------------------------------------------------------- model
@pytest.fixture(scope="module")
def lm(embedded_model_dir):
    model = LanguageModel(embedded_model_dir, batch_size=4, cache=None)
    yield model
    model.close()


@pytest.fixture
def invariant_lm(lm):
    """`lm`, for the bit-identity tests: batch invariance is claimed only where the start-up check
    (models/cpu_numerics.py) establishes it, and these tests follow that same check."""
    if not lm.batch_invariant:
        pytest.skip("no row padding makes this CPU's matrix products row-invariant: batch invariance is off here")
    return lm


def _story_prompts(lm: LanguageModel) -> list[str]:
    story = "The crew of the ship landed on a cold planet and found an old map near the river. " * 2
    convs = []
    for k, q in enumerate(["Who found the map?", "Where was the map?", "What was cold?", "Who landed?"]):
        user = f"Story: {story}\nQuestion: {q}\nA: the crew\nB: the captain" + (" (think)" * k)
        convs.append([{"role": "system", "content": "Answer with A or B."}, {"role": "user", "content": user}])
    convs.append([{"role": "user", "content": "Is the sky green? A: yes B: no"}])
    return [lm.render_chat(c, assistant_prefix="Answer:") for c in convs]


@pytest.mark.slow
@needs_model
def test_prefix_cache_scoring_equals_plain_scoring(lm):
    prompts = _story_prompts(lm)
    shared = plan_batches({i: lm._encode(p) for i, p in enumerate(prompts)}, batch_size=4)
    assert any(b.prefix > 0 for b in shared)  # the story prompts do go through the prefix cache
    with_prefix = lm.choice_logprobs(prompts, [" A", " B"])
    lm.prefix_sharing = False
    try:
        plain = lm.choice_logprobs(prompts, [" A", " B"])
    finally:
        lm.prefix_sharing = True
    with torch.inference_mode():  # one sequence at a time, full logits: the naive reference
        for prompt, got in zip(prompts, with_prefix):
            ids = torch.tensor([lm._encode(prompt)])
            ref = torch.log_softmax(lm.model(input_ids=ids).logits[0, -1], -1)[lm.label_token_ids([" A", " B"])]
            assert got == pytest.approx(ref.tolist(), abs=1e-4)
    for a, b in zip(with_prefix, plain):
        assert a == pytest.approx(b, abs=1e-4)


@pytest.mark.slow
@needs_model
def test_duplicate_prompts_are_computed_once_and_answered_per_input(lm):
    prompts = _story_prompts(lm)[:2]
    seen: list[int] = []
    original = lm._last_logits

    def counting(seqs, past):
        seen.append(len(seqs))
        return original(seqs, past)

    lm._last_logits = counting
    try:
        out = lm.choice_logprobs([prompts[0], prompts[1], prompts[0], prompts[0]], [" A", " B"])
    finally:
        lm._last_logits = original
    assert len(out) == 4
    assert out[0] == out[2] == out[3]
    assert out[0] != out[1]
    assert sum(seen) == 2  # two unique prompts went through the network


@pytest.mark.slow
@needs_model
def test_out_of_memory_backoff_splits_the_batch_and_keeps_the_answers(lm, monkeypatch):
    prompts = _story_prompts(lm)
    expected = lm.choice_logprobs(prompts, [" A", " B"])
    original = lm._last_logits

    def tight(seqs, past):
        if len(seqs) > 1:
            raise torch.OutOfMemoryError("fake: only one row fits")
        return original(seqs, past)

    monkeypatch.setattr(lm, "_last_logits", tight)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    budget = lm._token_budget
    try:
        got = lm.choice_logprobs(prompts, [" A", " B"])
    finally:
        lm._token_budget = budget
    for a, b in zip(got, expected):
        assert a == pytest.approx(b, abs=1e-4)


@pytest.mark.slow
@needs_model
def test_batched_greedy_equals_per_prompt_greedy(lm):
    convs = [
        [{"role": "user", "content": "Name a fruit."}],
        [{"role": "user", "content": "Explain in one sentence why the sky looks blue during the day."}],
        [{"role": "user", "content": "Say hello."}],
    ]
    params = GenerationParams(max_new_tokens=8)
    single = LanguageModel(lm.model_dir, batch_size=1, cache=None, model=lm.model, tokenizer=lm.tokenizer)
    assert lm.generate(convs, params) == single.generate(convs, params)


# ----------------------------------------------------------------------------- batch invariance
def _mixed_prompts(lm: LanguageModel) -> list[str]:
    """Story prompts sharing a long prefix, prompts extending one another (a reply written on), and short
    unrelated ones: every path of the planner and the prefix store."""
    story = _story_prompts(lm)
    extended = [story[1] + " B", story[1] + " B. The map was found near the river by the crew.\nAnswer:"]
    short = [
        lm.render_chat([{"role": "user", "content": q}], assistant_prefix="Answer:")
        for q in ("Two plus two? A: 4 B: 5", "Is ice cold? A: yes B: no", "Pick A or B.")
    ]
    return story + extended + short


@pytest.mark.slow
@needs_model
def test_scores_are_bit_identical_whatever_else_shares_the_call_the_batch_or_the_stored_prefix(invariant_lm, tmp_path):
    lm = invariant_lm
    # The resume guarantee: a cached score must not depend on what was computed with it. Compared with
    # ==, not approx: each prompt alone is the reference, every other arrangement must give its bits.
    prompts, labels = _mixed_prompts(lm), [" A", " B"]

    def fresh(**kw) -> LanguageModel:
        return LanguageModel(lm.model_dir, cache=kw.pop("cache", None), model=lm.model, tokenizer=lm.tokenizer, **kw)

    alone = [fresh(batch_size=1, prefix_store_mb=0).choice_logprobs([p], labels)[0] for p in prompts]
    assert len({tuple(a) for a in alone}) == len(prompts)  # distinct prompts, distinct scores
    for kw in ({"batch_size": 4}, {"batch_size": 3, "prefix_sharing": False}, {"batch_size": 8, "prefix_store_mb": 0}):
        assert fresh(**kw).choice_logprobs(prompts, labels) == alone, kw
    # Half the prompts scored (and cached) in a first call, then all of them: the resumed shape.
    cache = tmp_path / "calls.sqlite"
    first = fresh(batch_size=4, cache=cache)
    first.choice_logprobs(prompts[1::2], labels)
    first.close()
    resumed = fresh(batch_size=4, cache=cache)
    assert resumed.choice_logprobs(prompts, labels) == alone
    assert resumed.cache.hits == len(prompts[1::2])
    resumed.close()
    # Prompts extending a generated one start from its stored states (the judge's LLC after its reply).
    warm = fresh(batch_size=4)
    convs = [[{"role": "user", "content": "Is ice cold? A: yes B: no"}]]
    warm.generate(convs, GenerationParams(max_new_tokens=4))
    extension = warm.render_chat(convs[0]) + " Yes, ice is cold.\nAnswer:"
    got = warm.choice_logprobs([extension], labels)
    assert warm.prefix_store.hits >= 1
    assert got == fresh(batch_size=1, prefix_store_mb=0).choice_logprobs([extension], labels)


@pytest.mark.slow
@needs_model
def test_scores_are_bit_identical_for_prompts_spanning_several_attention_blocks(invariant_lm):
    lm = invariant_lm
    # The mixed prompts above span one or two attention blocks (decoding.ATTENTION_BLOCK slots); here rows
    # of one to six blocks share a pass, a block runs only over the rows that reach it, and a shared story
    # prefix ends mid-block.
    story = "The crew of the ship landed on a cold planet and found an old map near the river. " * 14
    prompts = [
        lm.render_chat(
            [{"role": "user", "content": f"Story: {story}\nQuestion: {q}\nA: yes B: no"}], assistant_prefix="Answer:"
        )
        for q in ("Was it cold?", "Was there a map near the river, and who found it?", "Did they land?")
    ]
    prompts += [
        lm.render_chat(
            [{"role": "user", "content": "Numbers: " + " ".join(map(str, range(90)))}], assistant_prefix="Answer:"
        ),
        lm.render_chat([{"role": "user", "content": "Pick A or B."}], assistant_prefix="Answer:"),
    ]
    lengths = sorted(len(lm._encode(p)) for p in prompts)
    assert lengths[0] < 128 and lengths[-1] > 256
    labels = [" A", " B"]

    def fresh(**kw) -> LanguageModel:
        return LanguageModel(lm.model_dir, cache=None, model=lm.model, tokenizer=lm.tokenizer, prefix_store_mb=0, **kw)

    alone = [fresh(batch_size=1).choice_logprobs([p], labels)[0] for p in prompts]
    assert fresh(batch_size=8).choice_logprobs(prompts, labels) == alone
    assert fresh(batch_size=8, prefix_sharing=False).choice_logprobs(prompts, labels) == alone


@pytest.mark.slow
@needs_model
def test_a_prompt_with_one_query_in_its_last_attention_block_scores_the_same_alone_and_batched(invariant_lm):
    lm = invariant_lm
    # 129 and 257 tokens (1 mod ATTENTION_BLOCK): alone, the last block holds one query; beside a longer
    # prompt it holds many.
    # A one-row matrix product takes another code path (other bits) unless the block is widened.
    words = " ".join(["time year people way day man thing woman life child world school state"] * 40)
    ids = lm._encode(words)
    prompts = [lm.tokenizer.decode(ids[: n - 3]) + "\nAnswer:" for n in (129, 257, 300)]
    assert [len(lm._encode(p)) for p in prompts] == [129, 257, 300]
    alone = [
        LanguageModel(
            lm.model_dir,
            batch_size=1,
            cache=None,
            model=lm.model,
            tokenizer=lm.tokenizer,
            prefix_store_mb=0,
            prefix_sharing=False,
        ).choice_logprobs([p], [" A", " B"])[0]
        for p in prompts
    ]
    together = LanguageModel(
        lm.model_dir,
        batch_size=8,
        cache=None,
        model=lm.model,
        tokenizer=lm.tokenizer,
        prefix_store_mb=0,
        prefix_sharing=False,
    ).choice_logprobs(prompts, [" A", " B"])
    assert together == alone
    # The same for a shared prefix of 129 tokens, run once for the group and reused.
    shared = [lm.tokenizer.decode(ids[:129]) + f" {word}\nAnswer:" for word in ("alpha", "beta", "gamma")]
    assert {b.prefix for b in plan_batches({i: lm._encode(p) for i, p in enumerate(shared)}, batch_size=8)} == {129}
    alone = [
        LanguageModel(
            lm.model_dir, batch_size=1, cache=None, model=lm.model, tokenizer=lm.tokenizer, prefix_store_mb=0
        ).choice_logprobs([p], [" A", " B"])[0]
        for p in shared
    ]
    grouped = LanguageModel(
        lm.model_dir, batch_size=8, cache=None, model=lm.model, tokenizer=lm.tokenizer, prefix_store_mb=0
    ).choice_logprobs(shared, [" A", " B"])
    assert grouped == alone


def test_packed_rows_are_bit_identical_alone_and_together_with_and_without_grouped_keys():
    from debate_audit.models.cpu_numerics import make_batch_invariant
    from debate_audit.models.decoding import forward_packed, register_attention

    torch.manual_seed(0)
    for kv_heads in (4, 2):  # one key head per query head (one-row blocks possible), and grouped
        model = tiny_llama(
            seed=None,  # the second model goes on from the first's draws
            vocab_size=500,
            hidden_size=128,
            intermediate_size=256,
            num_key_value_heads=kv_heads,
            max_position_embeddings=1024,
        ).eval()
        model.set_attn_implementation(register_attention())
        if make_batch_invariant(model) is None:  # the same start-up check as LanguageModel's
            pytest.skip("no row padding makes this CPU's matrix products row-invariant: batch invariance is off here")
        gen = torch.Generator().manual_seed(1)
        seqs = [torch.randint(0, 500, (n,), generator=gen).tolist() for n in (129, 257, 1, 200, 385)]
        together = forward_packed(model, seqs, cache_kwarg="cache")[0]
        for row, seq in enumerate(seqs):
            assert torch.equal(forward_packed(model, [seq], cache_kwarg="cache")[0][0], together[row]), (
                kv_heads,
                len(seq),
            )


@pytest.mark.slow
@needs_model
def test_greedy_text_is_the_same_alone_in_a_batch_and_from_a_stored_prefix(invariant_lm):
    lm = invariant_lm
    convs = [
        [{"role": "user", "content": "Name a fruit."}],
        [{"role": "user", "content": "Explain in one sentence why the sky looks blue during the day."}],
        [{"role": "user", "content": "Say hello."}],
    ]
    params = GenerationParams(max_new_tokens=12)

    def fresh(**kw) -> LanguageModel:
        return LanguageModel(lm.model_dir, cache=None, model=lm.model, tokenizer=lm.tokenizer, **kw)

    alone = [fresh(batch_size=1, prefix_store_mb=0).generate([c], params)[0] for c in convs]
    assert fresh(batch_size=4).generate(convs, params) == alone
    # A continuation call (the judge's next slot) from stored states equals one from scratch.
    warm = fresh(batch_size=4)
    warm.generate(convs, params)
    more = [c + [{"role": "assistant", "content": a[0] + " Also,"}] for c, a in zip(convs, alone)]
    assert warm.generate(more, params) == fresh(batch_size=1, prefix_store_mb=0).generate(more, params)
    assert warm.prefix_store.hits >= len(convs)


def test_prompts_sharing_nothing_are_batched_together_not_one_per_batch():
    seqs = {i: [1000 * i + k for k in range(10 + i)] for i in range(10)}  # no two share a first token
    seqs[10], seqs[11] = [5] * 40 + [6], [5] * 40 + [7]  # one real group
    plan = plan_batches(seqs, batch_size=4, min_prefix=16)
    loose = [b for b in plan if b.prefix == 0]
    assert [len(b.items) for b in loose] == [4, 4, 2]
    assert [b.prefix for b in plan if 10 in b.items] == [40]


def test_min_fill_ends_a_batch_before_a_much_shorter_prompt():
    seqs = {i: [1000 * i + k for k in range(n)] for i, n in enumerate([100, 95, 90, 60, 58, 20])}
    plan = plan_batches(seqs, batch_size=8, min_prefix=16, min_fill=0.85, fill_tokens=256)
    # 3 x 100 padded tokens reach fill_tokens: cut before 60; the short rest keeps filling one batch
    assert [sorted(b.items) for b in plan] == [[0, 1, 2], [3, 4, 5]]
    assert len(plan_batches(seqs, batch_size=8, min_prefix=16)) == 1
