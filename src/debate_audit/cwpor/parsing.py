"""Reading the judge's free text: rationale, chosen answer (A/B) and rubric confidence (1-5).

Conservative on purpose: a choice is read only from an explicit statement ("Final Answer: Answer B",
"The answer is A.", "I choose B."); when the statements disagree, or the judge echoes the format
("Answer A or Answer B"), the choice stays unparsed. Unparsed outputs are kept and counted, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Letters are matched case-sensitively so the article "a" never reads as a choice.
# "Answer" may be doubled or followed by a colon: after the prefilled "Final Answer: Answer" small models
# write "Answer B" or ": A" ("Final Answer: Answer Answer B", "Final Answer: Answer: A"), or bold the letter.
_LETTER = (
    r"\**\s*(?:(?i:answer)\s*[:：]?\s*\**\s*){0,2}[\(\[]?\s*\**\s*([AB])\b"
    r"(?!\s*(?:or|/|and)\s*(?i:answer)?\s*[\(\[]?[AB]\b)"
)
_FINAL = re.compile(r"(?i:final\s+answer)\s*\**\s*[:：\-]?\s*" + _LETTER)
# Outside a labelled line the letter must end the phrase ("The answer is A.", not "The answer is A bit ...").
_ENDS = r"(?=\s*(?:[.,;:!)\]*]|\n|\Z|(?:because|since|as)\b))"
_FALLBACK = [
    re.compile(r"(?i:\b(?:answer|choice|verdict|decision|selected answer|chosen answer))\s*\**\s*[:：]\s*" + _LETTER),
    re.compile(r"(?i:\b(?:correct\s+)?answer(?:\s+to\s+(?:this|the)\s+question)?\s+is)\s*:?\s*" + _LETTER + _ENDS),
    re.compile(r"(?i:\bI\s+(?:choose|pick|select|go\s+with))\s+" + _LETTER + _ENDS),
]
_CONFIDENCE = re.compile(
    r"(?i:confidence(?:\s+(?:level|score|rating))?)\s*\**\s*[:：=]?\s*\**\s*\(?([1-5])\b(?!\s*-\s*\d)(?:\s*/\s*5)?"
)
_RATIONALE = re.compile(r"(?i:rationale|reasoning|reason)\s*\**\s*[:：]\s*\**\s*(.+)")


@dataclass(frozen=True)
class ParsedJudgment:
    choice: str | None  # "A" / "B", None when no unambiguous statement was found
    rubric_confidence: int | None  # 1-5, None when absent, out of range or contradictory
    rationale: str | None
    parse_error: str | None  # why choice or confidence is missing; None when both parsed

    @property
    def parse_ok(self) -> bool:
        return self.choice is not None and self.rubric_confidence is not None


def _agreeing(values: list[str]) -> tuple[str | None, str | None]:
    """(the value, None) when all matches agree, (None, reason) otherwise."""
    distinct = sorted(set(values))
    if not distinct:
        return None, "missing"
    if len(distinct) > 1:
        return None, f"contradictory ({'/'.join(distinct)})"
    return distinct[0], None


def parse_choice(text: str) -> tuple[str | None, str | None]:
    finals = _FINAL.findall(text)
    if finals:
        return _agreeing(finals)
    if re.search(r"(?i:final\s+answer)", text):
        return None, "final answer is not a single A or B"
    return _agreeing([m for pattern in _FALLBACK for m in pattern.findall(text)])


def parse_confidence(text: str) -> tuple[int | None, str | None]:
    value, reason = _agreeing(_CONFIDENCE.findall(text))
    if value is None and reason == "missing" and re.search(r"(?i:confidence)", text):
        reason = "not a number from 1 to 5"
    return (int(value) if value is not None else None), reason


def parse_judgment(text: str) -> ParsedJudgment:
    choice, choice_err = parse_choice(text)
    confidence, conf_err = parse_confidence(text)
    match = _RATIONALE.search(text)
    rationale = match.group(1).strip().strip("*").strip() if match else None
    errors = [f"choice {choice_err}" if choice_err else "", f"confidence {conf_err}" if conf_err else ""]
    error = "; ".join(e for e in errors if e) or None
    return ParsedJudgment(choice, confidence, rationale or None, error)
