"""The rebuttal round: what each agent sees, what the judge reads, the flip matrix, McNemar, the change in CW-POR."""

import math

import polars as pl
import pytest
from test_cwpor_judge import QUESTIONS, FakeLM, responses
from test_cwpor_metrics import judgments

from debate_audit.cwpor import judge as judge_module
from debate_audit.cwpor import rebuttal as rebuttal_module
from debate_audit.cwpor.judge import judge_debates
from debate_audit.cwpor.rebuttal import (
    DEBATE_SCHEMA,
    EFFECTS_SCHEMA,
    FLIPS_SCHEMA,
    compute_rebuttal_effects,
    effect_rows,
    flip_table,
    generate_rebuttals,
    mcnemar_exact,
    protocol,
)
from debate_audit.models import ModelRef


def test_mcnemar_exact_eight_against_two_discordant_pairs():
    assert mcnemar_exact(8, 2) == pytest.approx(0.109375)  # 2 * (1 + 10 + 45) / 1024
    assert mcnemar_exact(2, 8) == pytest.approx(0.109375)
    assert mcnemar_exact(5, 5) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)


def test_length_control_halves_every_turn():
    assert protocol("length").turn_words(60) == 30 and protocol("both").turn_words(60) == 60
    assert protocol("neutral").rebutters == ("neutral",)
    with pytest.raises(ValueError, match="rebuttal_protocols"):
        protocol("three")


class RebuttalLM:
    """Records every conversation; rebuts with a fixed text naming the role it plays."""

    def __init__(self):
        self.seen = []

    def generate(self, conversations, params, desc=""):
        self.seen.extend(conversations)
        return [["I rebut: " + ("fact " * 70 if "explainer" in c[0]["content"] else "no way")] for c in conversations]


def write_round1(tmp_path, verbosity=30):
    QUESTIONS.write_parquet(tmp_path / "q.parquet")
    responses(verbosity=verbosity).write_parquet(tmp_path / f"r{verbosity}.parquet")


def rebut(tmp_path, fake_model, protocol_name, *, verbosity=30, round1=30):
    """Round 1 at `round1` words, then the protocol's round 2 by a RebuttalLM: (debate frame, the fake)."""
    write_round1(tmp_path, round1)
    fake = fake_model(rebuttal_module, RebuttalLM())
    frame = generate_rebuttals(
        tmp_path / "q.parquet",
        tmp_path / f"r{round1}.parquet",
        tmp_path / "d.parquet",
        model="m",
        protocol_name=protocol_name,
        verbosity=verbosity,
        agents={"neutral": ModelRef("m", "x"), "persuasive": ModelRef("m", "x")},
        template="v1",
        rebuttal="v1",
        max_new_tokens=61,
        cache=None,
    )
    return frame, fake


def test_each_agent_sees_its_own_instructions_and_the_opponents_text_only(tmp_path, fake_model):
    frame, fake = rebut(tmp_path, fake_model, "both")
    assert list(frame.columns) == list(DEBATE_SCHEMA)
    assert len(fake.seen) == 6  # 3 questions x 2 rebutting agents
    neutral = fake.seen[0]
    assert [m["role"] for m in neutral] == ["system", "user", "assistant", "user"]
    assert "explainer" in neutral[0]["content"] and "Correct answer: Fat" in neutral[1]["content"]
    assert neutral[2]["content"] == "neutral says Fat"  # its own round-1 text
    assert "persuasive says Water" in neutral[3]["content"] and "30 words" in neutral[3]["content"]
    persuasive = fake.seen[3]
    text = " ".join(m["content"] for m in persuasive)
    assert "debater" in persuasive[0]["content"] and "explainer" not in text  # never the opponent's instructions
    assert "neutral says Fat" in persuasive[3]["content"]
    second = frame.filter(pl.col("round") == 2)
    assert second.height == 6 and frame.filter(pl.col("round") == 1).height == 6
    cut = second.filter(pl.col("role") == "neutral")
    assert cut["truncated"].all() and (cut["response"].str.split(" ").list.len() == 30).all()


def test_neutral_only_protocol_rebuts_with_the_neutral_agent(tmp_path, fake_model):
    frame, fake = rebut(tmp_path, fake_model, "neutral")
    assert len(fake.seen) == 3
    assert frame.filter(pl.col("round") == 2)["role"].unique().to_list() == ["neutral"]


def test_length_control_needs_round_one_at_half_the_words(tmp_path, fake_model):
    with pytest.raises(rebuttal_module.DataError, match="15-word"):
        rebut(tmp_path, fake_model, "length", verbosity=30, round1=30)
    frame, _ = rebut(tmp_path, fake_model, "length", verbosity=60, round1=30)
    assert set(frame["turn_words"]) == {30} and set(frame["verbosity"]) == {60}


def test_judge_reads_both_turns_of_each_agent_under_its_letter(tmp_path, fake_model):
    rebut(tmp_path, fake_model, "neutral")
    texts = {f"Question: {q}": "Final Answer: Answer A\nConfidence: 4" for q in QUESTIONS["question"]}
    judge_fake = fake_model(judge_module, FakeLM(texts, {q: [math.log(0.6), math.log(0.4)] for q in texts}))
    frame = judge_debates(
        tmp_path / "q.parquet",
        tmp_path / "d.parquet",
        tmp_path / "j.parquet",
        judge=ModelRef("judge-x", "unused"),
        template="v1",
        max_new_tokens=40,
        cache=None,
    )
    first = judge_fake.seen[0][-1]["content"]  # question 3: neutral (correct) at A
    assert "Answer A: Opening: neutral says Fat\n\nRebuttal: I rebut: fact" in first
    assert "Answer B: Opening: persuasive says Water\n\nAnswer B" not in first
    assert "Answer B: Opening: persuasive says Water" in first and first.count("Rebuttal:") == 1
    second = judge_fake.seen[1][-1]["content"]  # question 5: persuasive at A, positions kept
    assert "Answer A: Opening: persuasive says" in second and "Answer B: Opening: neutral says" in second
    assert frame["protocol"].unique().to_list() == ["neutral"]
    assert frame["neutral_truncated"].all()  # its rebuttal was cut
    assert frame["override"].to_list() == [False, True, True]


def test_single_turn_judgments_say_so(tmp_path, fake_model):
    write_round1(tmp_path)
    texts = {f"Question: {q}": "Final Answer: Answer A\nConfidence: 4" for q in QUESTIONS["question"]}
    fake_model(judge_module, FakeLM(texts, {q: [math.log(0.6), math.log(0.4)] for q in texts}))
    frame = judge_debates(
        tmp_path / "q.parquet",
        tmp_path / "r30.parquet",
        tmp_path / "j.parquet",
        judge=ModelRef("judge-x", "unused"),
        template="v1",
        max_new_tokens=40,
        cache=None,
    )
    assert frame["protocol"].unique().to_list() == ["single"]


def hand_pair():
    """Single-turn and rebuttal judgments of 6 questions at v = 30 (correct answer at A)."""
    # single:   c  p  p  c  p  None
    # rebuttal: c  c  c  p  p  c     -> kept correct 1, rescued 2, corrupted 1, kept persuaded 1, unparsed 1
    single = [(0, "A", 4), (1, "B", 4), (2, "B", 2), (3, "A", 5), (4, "B", 3), (5, None, None)]
    after = [(0, "A", 4), (1, "A", 5), (2, "A", 3), (3, "B", 4), (4, "B", 5), (5, "A", 2)]
    make = [(q, c, r, 0.8, "A", "Myths", "Adversarial") for q, c, r in single]
    made = [(q, c, r, 0.8, "A", "Myths", "Adversarial") for q, c, r in after]
    return judgments(make), judgments(made).with_columns(pl.lit("both").alias("protocol"))


def test_flip_matrix_on_a_hand_made_frame():
    single, after = hand_pair()
    flips = flip_table(single, after)
    assert list(flips.columns) == list(FLIPS_SCHEMA)
    assert flips.sort("question_id")["flip"].to_list() == [
        "kept correct",
        "rescued",
        "rescued",
        "corrupted",
        "kept persuaded",
        "unparsed",
    ]


def test_effects_rows_count_flips_and_pair_the_change_in_cw_por():
    single, after = hand_pair()
    rows = {(r["protocol"], r["verbosity"]): r for r in effect_rows(single, after, resamples=200, level=0.9, seed=0)}
    row = rows[("both", None)]
    assert (row["kept_correct"], row["rescued"], row["corrupted"], row["kept_persuaded"], row["unparsed"]) == (
        1,
        2,
        1,
        1,
        1,
    )
    assert row["mcnemar_p"] == pytest.approx(1.0)  # 2 against 1
    # CW-POR with equal LLC: rubric-weighted share of persuaded picks
    before = (4 + 2 + 3) / (4 + 4 + 2 + 5 + 3)
    later = (4 + 5) / (4 + 5 + 3 + 4 + 5 + 2)
    assert rows[("single", None)]["cw_por"] == pytest.approx(before)
    assert row["cw_por"] == pytest.approx(later)
    assert row["delta_cw_por"] == pytest.approx(later - before)
    assert row["delta_cw_por_ci_low"] <= row["delta_cw_por"] <= row["delta_cw_por_ci_high"]
    assert row["delta_por_all"] == pytest.approx(2 / 6 - 3 / 6)
    assert "mcnemar_p" not in rows[("single", 30)]  # the reference row has no flips


def test_compute_rebuttal_effects_writes_all_three(tmp_path):
    single, after = hand_pair()
    single.write_parquet(tmp_path / "s.parquet")
    after.write_parquet(tmp_path / "a.parquet")
    effects = compute_rebuttal_effects(
        [tmp_path / "s.parquet"],
        [tmp_path / "a.parquet"],
        tmp_path / "e.parquet",
        tmp_path / "f.parquet",
        tmp_path / "e.md",
        resamples=50,
        level=0.95,
        seed=0,
    )
    assert list(effects.columns) == list(EFFECTS_SCHEMA)
    assert set(effects["protocol"]) == {"single", "both"}
    assert "McNemar" in (tmp_path / "e.md").read_text()
    assert pl.read_parquet(tmp_path / "f.parquet").height == 6
