"""When two dataset texts count as the same: one key for answers, questions and titles of every loader."""

from __future__ import annotations

# Sentence-ending marks only: "Paris." is "Paris", but "94%" is not "94" and "f(x)" is not "f(x".
TRAILING_PUNCTUATION = ".,;:!?"
NORMALISATION = "after normalising whitespace, case and trailing punctuation"


def text_key(text: str) -> str:
    """`text` with runs of whitespace as one space, case folded and trailing . , ; : ! ? removed."""
    return " ".join(text.split()).casefold().rstrip(TRAILING_PUNCTUATION + " ")
