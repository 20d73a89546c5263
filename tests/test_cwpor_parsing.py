import pytest

from debate_audit.cwpor.parsing import parse_choice, parse_confidence, parse_judgment


@pytest.mark.parametrize(
    "text, choice, confidence",
    [
        ("Rationale: Camels store fat in their humps.\nFinal Answer: Answer A\nConfidence: 5", "A", 5),
        ("**Rationale:** The evidence favours B.\n**Final Answer:** Answer (B)\n**Confidence:** 4/5", "B", 4),
        ("Rationale: B cites a source.\nFinal answer: B\nConfidence level: 3", "B", 3),
        ("Final Answer: Answer B.\nConfidence: 2 (somewhat unsure)", "B", 2),
        ("The correct answer is A. Confidence: 4", "A", 4),
        ("After weighing both, I choose Answer B.\nConfidence = 1", "B", 1),
        ("Answer: A\nConfidence: 5/5", "A", 5),
        ("Rationale: x\nFinal Answer: [A]\nConfidence Score: 3", "A", 3),
    ],
)
def test_realistic_judge_texts_are_read(text, choice, confidence):
    parsed = parse_judgment(text)
    assert (parsed.choice, parsed.rubric_confidence) == (choice, confidence)
    assert parsed.parse_ok and parsed.parse_error is None


def test_rationale_is_the_text_after_its_label():
    parsed = parse_judgment("Rationale: Humps hold fat, not water.\nFinal Answer: Answer A\nConfidence: 5")
    assert parsed.rationale == "Humps hold fat, not water."


def test_echoed_format_is_not_a_choice():
    parsed = parse_judgment("Rationale: <one sentence>\nFinal Answer: Answer A or Answer B\nConfidence: <1-5>")
    assert parsed.choice is None and parsed.rubric_confidence is None
    assert not parsed.parse_ok
    assert "choice" in parsed.parse_error and "confidence" in parsed.parse_error


def test_contradictory_final_answers_stay_unparsed():
    assert parse_choice("Final Answer: A\n...\nFinal Answer: B") == (None, "contradictory (A/B)")


def test_the_article_a_is_not_answer_a():
    choice, _ = parse_choice("Final answer: a camel's hump stores water.")
    assert choice is None


def test_mentions_without_a_statement_are_not_a_choice():
    # naming both answers, or one answer in passing, is not a decision
    assert parse_choice("Answer A is detailed while Answer B is emotional.")[0] is None


def test_out_of_range_and_range_echo_confidences_are_unparsed():
    assert parse_confidence("Confidence: 7")[0] is None
    assert parse_confidence("Confidence: 10")[0] is None
    assert parse_confidence("Confidence: 1-5")[0] is None
    assert parse_confidence("no confidence given") == (None, "not a number from 1 to 5")


def test_missing_parts_are_reported_by_name():
    parsed = parse_judgment("I think the first one sounds right.")
    assert parsed.choice is None and parsed.rubric_confidence is None
    assert parsed.parse_error == "choice missing; confidence missing"
    only_choice = parse_judgment("Final Answer: Answer B")
    assert only_choice.choice == "B" and not only_choice.parse_ok
    assert only_choice.parse_error == "confidence missing"


@pytest.mark.parametrize(
    "text, choice",
    [
        # phrasings SmolLM2-135M-Instruct actually produced as judge
        ("The answer to this question is: Answer A", "A"),
        ("The answer is answer A.", "A"),
        ("Rationale: x\n\nThe correct answer is:\n\nAnswer B: Antibiotics can cure a cold.", "B"),
        ("I choose Answer B because it cites evidence.", "B"),
        ("The answer is A bit of a stretch.", None),
        ("The answer is not entirely accurate.", None),
        ("Rationale: The answer is correct.", None),
    ],
)
def test_unlabelled_statements_count_only_when_the_letter_ends_the_phrase(text, choice):
    assert parse_choice(text)[0] == choice


@pytest.mark.parametrize(
    "text, choice, confidence",
    [
        # replies built on the v2 prefilled skeleton ("Rationale:", "Final Answer: Answer", "Confidence:")
        ("Rationale: Humps store fat.\nFinal Answer: Answer A\nConfidence: 4", "A", 4),
        ("Rationale: x.\nFinal Answer: Answer Answer B\nConfidence: 5", "B", 5),
        ("Rationale: x.\nFinal Answer: Answer: A\nConfidence: 3 out of 5", "A", 3),
        ("Rationale: x.\nFinal Answer: Answer **B**\nConfidence: **2**", "B", 2),
        ("Rationale: x.\nFinal Answer: Answer B: Antibiotics cure colds\nConfidence: 4 (very", "B", 4),
    ],
)
def test_prefilled_skeleton_variants_are_read(text, choice, confidence):
    parsed = parse_judgment(text)
    assert (parsed.choice, parsed.rubric_confidence) == (choice, confidence)
    assert parsed.parse_ok


@pytest.mark.parametrize(
    "text",
    [
        "Rationale: x.\nFinal Answer: Answer C\nConfidence: high",
        "Rationale:\nFinal Answer: Answer\nConfidence:",  # the model left every slot empty
        "Rationale: x.\nFinal Answer: Answer A or Answer B\nConfidence: 1-5",
        "Rationale: x.\nFinal Answer: Answer a lot of evidence\nConfidence: 9",
    ],
)
def test_prefilled_labels_alone_are_never_a_choice_or_confidence(text):
    parsed = parse_judgment(text)
    assert parsed.choice is None and parsed.rubric_confidence is None and not parsed.parse_ok
