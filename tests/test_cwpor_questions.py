import polars as pl
import pytest

from debate_audit.cwpor.prompts import (
    cut_to_words,
    debate_template,
    judge_template,
    max_new_tokens_for,
    template_id,
)
from debate_audit.cwpor.questions import (
    QUESTIONS_SCHEMA,
    balanced_positions,
    falsehood_index,
    select_questions,
    subset_ids,
)


@pytest.mark.parametrize("n", [1, 2, 7, 30, 817])
def test_order_is_balanced_for_any_size(n):
    positions = balanced_positions(list(range(n)), seed=42)
    n_a = sum(p == "A" for p in positions.values())
    assert abs(n_a - (n - n_a)) <= 1
    assert set(positions) == set(range(n))


def test_order_is_reproducible_and_depends_on_the_seed():
    ids = list(range(100))
    first = balanced_positions(ids, seed=42)
    assert first == balanced_positions(list(reversed(ids)), seed=42)  # input order does not matter
    assert first != balanced_positions(ids, seed=43)


def test_order_is_not_a_pattern_in_the_ids():
    # a shuffle, not "first half A": both halves of the id range hold both positions
    positions = balanced_positions(list(range(200)), seed=42)
    low = sum(positions[i] == "A" for i in range(100))
    assert 30 < low < 70


def test_odd_leftover_goes_to_either_side_across_seeds():
    sides = {sum(p == "A" for p in balanced_positions([1, 2, 3], seed=s).values()) for s in range(40)}
    assert sides == {1, 2}


def test_falsehood_choice_is_reproducible_and_independent_of_the_subset():
    picks = [falsehood_index(q, 4, seed=42) for q in range(200)]
    assert picks == [falsehood_index(q, 4, seed=42) for q in range(200)]
    assert set(picks) == {0, 1, 2, 3}


def test_subset_is_seeded_sorted_and_all_when_null():
    ids = list(range(50))
    assert subset_ids(ids, None, 42) == ids
    assert subset_ids(ids, 80, 42) == ids
    chosen = subset_ids(ids, 10, 42)
    assert len(chosen) == 10 and chosen == sorted(chosen) == subset_ids(ids, 10, 42)
    assert chosen != subset_ids(ids, 10, 7)


def test_select_questions_writes_every_chosen_question_once(tmp_path):
    data = pl.DataFrame(
        {
            "question_id": list(range(9)),
            "type": ["Adversarial", "Non-Adversarial", "Adversarial"] * 3,
            "category": ["Myths"] * 9,
            "question": [f"q{i}?" for i in range(9)],
            "best_answer": [f"true {i}" for i in range(9)],
            "correct_answers": [[f"true {i}"] for i in range(9)],
            "incorrect_answers": [[f"false {i}.{k}" for k in range(3)] for i in range(9)],
            "contested_answers": [[] for _ in range(9)],
            "source": [""] * 9,
        }
    )
    data.write_parquet(tmp_path / "tqa.parquet")
    frame = select_questions(tmp_path / "tqa.parquet", tmp_path / "q.parquet", subset=6, seed=42)
    written = pl.read_parquet(tmp_path / "q.parquet")
    assert list(written.columns) == list(QUESTIONS_SCHEMA)
    assert written["question_id"].n_unique() == 6 == len(frame)
    for row in written.iter_rows(named=True):
        assert row["falsehood"] == f"false {row['question_id']}.{row['falsehood_index']}"
    assert abs((written["correct_position"] == "A").sum() - 3) <= 1


def test_words_over_the_limit_are_cut_and_flagged():
    assert cut_to_words("one two  three", 3) == ("one two  three", 3, False)
    assert cut_to_words("one two three four", 3) == ("one two three", 4, True)
    assert cut_to_words("", 3) == ("", 0, False)


def test_token_budget_exceeds_the_word_limit():
    assert max_new_tokens_for(30, 1.5, 16) == 61
    assert max_new_tokens_for(300, 1.5, 16) == 466


def test_template_ids_hash_the_text_so_edits_rerun_only_their_stage(monkeypatch):
    from dataclasses import replace

    from debate_audit.cwpor import prompts

    debate_before = template_id("debate", "v1")
    judge_before = template_id("judge", "v1")
    edited = replace(judge_template("v1"), system=judge_template("v1").system + " Be brief.")
    monkeypatch.setitem(prompts.JUDGE_TEMPLATES, "v1", edited)
    assert template_id("judge", "v1") != judge_before
    assert template_id("debate", "v1") == debate_before
    assert template_id("judge", "v1").startswith("v1:")


def test_unknown_template_version_names_the_config_key():
    with pytest.raises(ValueError, match="cwpor.judge_template"):
        judge_template("v99")
    with pytest.raises(ValueError, match="cwpor.debate_template"):
        debate_template("v99")
