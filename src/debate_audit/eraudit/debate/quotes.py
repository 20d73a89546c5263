"""Quotes in debater arguments: syntax, verification against the context, word limits.

Debaters quote the context as <quote>exact words</quote>. A quote is verified when its text occurs in the
context after both are normalised by one of two rules (`debate.quote_match`):

- "normalised" (default, as the ER-Audit release and ucl-dark/llm_debate check quotes): typographic quotes
  folded to straight ones, ASCII punctuation removed, lower-cased, runs of whitespace -> one space. A quote
  that differs from the text only in punctuation or case is verified.
- "exact": whitespace normalisation only (runs of whitespace -> one space, NFKC, typographic quotes and
  dashes folded, case and punctuation kept).

An empty quote (nothing left after normalisation) is never verified. In the public transcript verified quotes become
<v_quote>...</v_quote> and unverified ones <u_quote>...</u_quote>, so readers (debaters in later rounds,
verifiers) can tell evidence from claims.
"""

from __future__ import annotations

import re
import string
import unicodedata

QUOTE = re.compile(r"<quote>(.*?)</quote>", re.DOTALL | re.IGNORECASE)
_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


QUOTE_MATCH_MODES = ("normalised", "exact")
_STRAIGHT_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise_whitespace(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_FOLD)
    return " ".join(text.split())


def normalise_loose(text: str) -> str:
    """The release's quote key: straight quotes, no ASCII punctuation, lower case, single spaces."""
    text = text.translate(_STRAIGHT_QUOTES).translate(_NO_PUNCTUATION).lower()
    return " ".join(text.split())


def quote_key(text: str, mode: str = "normalised") -> str:
    """`text` normalised for quote matching under `mode` (module docstring)."""
    if mode == "normalised":
        return normalise_loose(text)
    if mode == "exact":
        return normalise_whitespace(text).strip(" \"'")
    raise ValueError(f"debate.quote_match must be one of {QUOTE_MATCH_MODES}, got {mode!r}")


def mark_quotes(argument: str, context: str, mode: str = "normalised") -> tuple[str, int, int]:
    """(argument with quotes marked <v_quote>/<u_quote>, number of quotes, number verified)."""
    haystack = quote_key(context, mode)
    counts = [0, 0]

    def replace(match: re.Match) -> str:
        needle = quote_key(match.group(1), mode)
        ok = bool(needle) and needle in haystack
        counts[0] += 1
        counts[1] += ok
        tag = "v_quote" if ok else "u_quote"
        return f"<{tag}>{match.group(1)}</{tag}>"

    return QUOTE.sub(replace, argument), counts[0], counts[1]


def count_words(text: str) -> int:
    return len(re.sub(r"</?quote>", " ", text, flags=re.IGNORECASE).split())


# Appended to an argument cut at the word limit, after the kept words (the release's default policy:
# debate.py truncate() with marker_within_limit False, "legacy_space_split_content_cap_marker_outside").
TRUNCATION_MARKER = "... <TRUNCATED>"


def enforce_word_limit(text: str, limit: int) -> tuple[str, int, bool]:
    """(text cut to `limit` words, the original word count, whether it was cut).

    Quote tags do not count as words; a quote left open by the cut is closed so it can still be checked, and
    a cut text ends in TRUNCATION_MARKER, so readers see that the argument went on.
    """
    words = count_words(text)
    if words <= limit:
        return text.strip(), words, False
    kept: list[str] = []
    seen = 0
    for token in re.split(r"(\s+)", text.strip()):
        if token.isspace() or not token:
            kept.append(token)
            continue
        bare = re.sub(r"</?quote>", "", token, flags=re.IGNORECASE)
        if bare:
            if seen == limit:
                break
            seen += 1
        kept.append(token)
    cut = "".join(kept).strip()
    opened = len(re.findall(r"<quote>", cut, flags=re.IGNORECASE))
    closed = len(re.findall(r"</quote>", cut, flags=re.IGNORECASE))
    if opened > closed:
        cut += "</quote>"
    return cut + TRUNCATION_MARKER, words, True
