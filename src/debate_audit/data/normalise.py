"""When two texts count as the same: one Unicode folding for every identity check of the project.

`fold` is the Unicode step every key starts from: NFKC (full-width letters, ligatures, non-breaking and other
compatibility spaces become their plain forms) then casefolding, the first two steps of the ER-Audit paper's
App. D.3 ("after Unicode NFKC, casefolding, and retaining only alphanumeric characters"). Two keys are built
on it:

- `text_key`, for dataset texts (answers, questions, pairs, titles, contexts): the folded text without
  invisible format characters, runs of whitespace as one space, trailing sentence marks dropped. It keeps
  every other character, where App. D.3's third step would drop them: on the GPQA-H release, "alphanumerics
  only" makes the true and the false answer of 3 of its 101 pairs the same text (answers that differ only in
  a sign, + against -, inside a formula), and a pair the loader would then reject is a real pair of the paper.
- `paraphrase_key`, for paraphrases (eraudit/paraphrase/validation.py): App. D.3's whole rule, alphanumerics
  only, with common contractions spelled out first (its "differing only in common contractions"); the
  paraphrase checks test numbers and symbols apart, as App. D.3 asks ("protected technical content, checked
  separately from prose normalization").
"""

from __future__ import annotations

import re
import unicodedata

# Sentence-ending marks only: "Paris." is "Paris", but "94%" is not "94" and "f(x)" is not "f(x".
TRAILING_PUNCTUATION = ".,;:!?"
NORMALISATION = "after Unicode NFKC, casefolding and normalising whitespace and trailing punctuation"


def fold(text: str) -> str:
    """NFKC, then casefold: the Unicode step of every identity key."""
    return unicodedata.normalize("NFKC", text).casefold()


def text_key(text: str) -> str:
    """`text` folded (NFKC, casefold), its invisible format characters (zero-width spaces, soft hyphens, ...)
    removed, runs of whitespace as one space and trailing . , ; : ! ? removed."""
    folded = "".join(ch for ch in fold(text) if unicodedata.category(ch) != "Cf")
    return " ".join(folded.split()).rstrip(TRAILING_PUNCTUATION + " ")


# Common English contractions, spelled out before the paraphrase key is taken: App. D.3's template counts two
# versions "differing only in common contractions" as duplicates. "'s" and "'d" are ambiguous (is / has /
# possessive, would / had), so only the forms read one way are listed.
_CONTRACTIONS = [
    (re.compile(r"\b(can)'t\b"), r"\1 not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(it|that|what|where|who|how|there|here|he|she|which|why|when)'s\b"), r"\1 is"),
]


def paraphrase_key(text: str) -> str:
    """App. D.3's key: NFKC, casefold, common contractions spelled out, alphanumerics only."""
    folded = fold(text).replace("\u2019", "'")
    for pattern, spelled in _CONTRACTIONS:
        folded = pattern.sub(spelled, folded)
    return "".join(ch for ch in folded if ch.isalnum())
