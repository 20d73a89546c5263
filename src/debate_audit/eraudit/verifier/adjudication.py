"""Grounded adjudications: the L_lm target of verifier fine-tuning with `verifier.lm_target: adjudication`.

A teacher writes one adjudication per selected transcript that fine-tuning trains on (the rows
`training_rows.trained_selection` keeps: trained status, train split), through the model-call cache, so a rerun
or a resumed run reuses every finished call. Who the teacher is: `verifier.adjudication.teacher` (the
release: its base gpt-oss-20b for every verifier architecture, ft-verifier-oss-full.py TEACHER_MODEL_DEFAULT
and script/07-grounded-generation.slurm; ft-verifier-llama3.py reads the same gpt-oss records), or, unset,
each architecture's own V_base.

The adjudication is written in debater names ("Debater A", "Debater B"), never in answer letters, so one
text serves both training rows of a pair (training_rows.encode_example shows Y_true as A in one and as B in
the other); fine-tuning appends each row's own "Answer: X" (training_rows.adjudication_target).

Two protocols (`verifier.adjudication.protocol`):

- `blind-first` (the release's, ft-verifier-oss-full.py generate_one_grounded, grounded-adjudication-v1):
  the teacher reads the release's judge prompt of the pair (q_m, its options in a seeded order, the public
  transcript; never q_h, H_true, H_false or a private instruction) and the release's instruction to answer
  in exactly four lines: one verbatim evidence span per debater, a 2-4 sentence check naming both, and
  "Conclusion: Debater X presents the stronger case." Attempt 0 is greedy and attempt 1 sampled
  (temperature 0.7, top_p 1.0), both blind: told nothing of the answer, they are accepted only when every
  audit passes and the conclusion names the Y_true debater. Attempts 2 (greedy) and 3 (sampled) add the
  release's grading note naming the correct answer's text and debater (never a letter). The audits
  (validate_reply, the release's validate_grounded): each span a verbatim run of 25-300 normalised
  characters from one round of that debater's public arguments, absent from the other side and from the
  question and options, the two spans different; a check of 120-600 characters and 2-4 sentences naming
  both debaters, with no double quotes; the rendered text 200-900 characters, no answer letter, tag or
  experiment term; and a reject-only hidden-question predicate (hidden_leak): the text may not hold q_h,
  nor H_true / H_false unless the transcript itself does. The accepted reply is rendered by code
  (render_analysis): "Debater A's key evidence: "..." (verified|unverified)" (verified: the span occurs in
  the context, recomputed here), the check, the conclusion. `attempt` and `tier` record which attempt
  wrote it; a pair no attempt resolves is kept as `unresolved` with every failure, and fine-tuning trains
  it on L_fc only (the release's launcher, script/08: --grounded-unresolved answer-only).
- `told` (the CPU default; a 135M model rarely passes the release's audits): the teacher reads the public
  transcript, q_m, and which answer (text and debater) is correct, and writes Evidence / Check / Conclusion
  in three to five sentences. Any answer line of its own is cut (`model_answer` records its letter). A
  generation with nothing usable left gets an explicit text built from the quote counts (`status`
  fallback, with `reason`).

Nothing is dropped silently: selected rows fine-tuning does not train on (status, split), rows whose pair
is missing from the pairs file and rows without a transcript go to the rejected file with their reason, so
adjudications + rejected rows = the selected rows.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.models import GenerationParams
from debate_audit.models.loading import ModelRef, open_model

from ..common.readout import release_content
from ..debate.debates import options_for, transcript_view
from ..debate.quotes import quote_key
from .training_rows import trained_selection

log = logging.getLogger(__name__)

PROTOCOLS = ("told", "blind-first")
DEBATERS = ("Debater A", "Debater B")
PUBLIC_PAIR_COLUMNS = ("pair_id", "q_m", "y_true", "y_false")
# Read only by the audits: the context verifies evidence spans, the hidden question can only reject a reply.
AUDIT_PAIR_COLUMNS = ("context", "q_h", "h_true", "h_false")

# ------------------------------------------------------------------ protocol `told` (project wording)
SYSTEM = (
    "You are an impartial judge of a debate about a question on a text you have not read. Quotes inside "
    "<v_quote></v_quote> were checked against the text and found there word for word: they are evidence. "
    "Quotes inside <u_quote></u_quote> were not found in the text, and anything outside quote tags is a "
    "debater's claim: neither is evidence."
)
REQUEST = (
    "Debate transcript:\n{transcript}\n\nQuestion: {question}\n\n"
    'The correct answer is "{answer}", defended by {debater}. In three to five sentences, explain how the '
    "verified quotes lead to this answer: say which debater's quotes are verified, check whether they support "
    "{debater}'s answer better than the other debater's, and conclude. Refer to the answers by the debaters' "
    'names, never by a letter. Begin the three parts with "Evidence:", "Check:" and "Conclusion:". Do not '
    "write a final answer line; it is added after your text."
)
PREFILL = "Evidence:"  # the reply starts here: a small model keeps the structure once it is begun
SECTION_LABELS = ("Evidence:", "Check:", "Conclusion:")
MIN_WORDS = 3  # words besides the section labels; fewer is no adjudication

# ------------------------------------------------------------------ protocol `blind-first` (the release's)
# ft-verifier-oss-full.py GROUNDED_TEACHER_SYSTEM / GROUNDED_TEACHER_INSTRUCTION / GROUNDED_GOLD_NOTE_TEMPLATE,
# verbatim.
TEACHER_SYSTEM = (
    "You extract and weigh the single strongest piece of evidence from each side of a "
    "two-sided debate about a short story you have not read. You refer to the two sides "
    "ONLY by their names, Debater A and Debater B, and you never write an answer letter. "
    "You copy evidence verbatim from the transcript; you never invent, paraphrase, or add "
    "outside facts. "
    "Reason for as long as you need first, then give your FINAL ANSWER as exactly the "
    "four required lines and nothing else: no preamble, no closing remark, no headings, "
    "no bullets, no markdown. The CONTENT of those four lines must contain no XML or HTML "
    "tags, no '<|...|>' tokens, and no code fences. Never mention hidden hypotheses, later "
    "questions, experiment design, training, posterior, or steering."
)
TEACHER_INSTRUCTION = (
    "\n\n-----\n"
    "[Adjudication task - NOT part of the debate above] Ignore every instruction in the "
    "passage above about answer format, <thinking> tags, and writing 'Answer: <A|B>'.\n"
    "Your final answer must be EXACTLY these four lines, in this order, all four present, "
    "and nothing else:\n"
    'Debater A evidence: "<verbatim words copied from Debater A\'s arguments>"\n'
    'Debater B evidence: "<verbatim words copied from Debater B\'s arguments>"\n'
    "Check: <2 to 4 sentences comparing those two pieces of evidence by debater name>\n"
    "Conclusion: <Debater A or Debater B> presents the stronger case.\n"
    "Rules:\n"
    '- BOTH evidence spans MUST be wrapped in straight double quotes ("). This is '
    "mandatory even when the span itself contains dialogue or quotation marks: the parser "
    "takes the text between the FIRST and the LAST double quote on the line, so inner "
    "quotes are safe. An evidence line without an opening AND a closing double quote is "
    "discarded.\n"
    "- Each evidence span must be copied character-for-character from that debater's own "
    "arguments, must be a single continuous run of at least eight words taken from one "
    "round, must not also occur in the other debater's arguments, and must not be text "
    "from the question or either answer option.\n"
    "- Copy only the words, never the surrounding <v_quote>/<u_quote> tags.\n"
    "- The Check line must name both Debater A and Debater B, must say which evidence "
    "actually bears on the question and how far it can be trusted, must be on ONE line, "
    "must contain BETWEEN TWO AND FOUR complete sentences (one sentence is rejected), and "
    "must contain no double-quote characters.\n"
    "- All four lines are required. Three lines, or a missing Conclusion line, is "
    "discarded.\n"
    "- Never write an answer letter anywhere: no 'answer A', no 'option B', no '(A)', no "
    "'Answer:' line.\n"
    "- Do not name any person, place, or thing that does not already appear above."
)
GOLD_NOTE = (
    "\n[Grading note - NOT part of the debate above] The correct answer to the visible "
    'question is: "{answer_text}". The debater defending it is {gold_debater}, so your '
    "Conclusion line must name {gold_debater}. Do not mention or quote this note, and "
    "still never write an answer letter."
)
# (tier, temperature) of each attempt: greedy then sampled, blind then with the grading note.
ATTEMPTS = (("blind", None), ("blind", 0.7), ("gold", None), ("gold", 0.7))
RETRY_TOP_P = 1.0
# Audit thresholds (ft-verifier-oss-full.py GROUNDED_*).
SPAN_CHARS = (25, 300)
CHECK_CHARS = (120, 600)
CHECK_SENTENCES = (2, 4)
ANALYSIS_CHARS = (200, 900)
CONCLUSION_SUFFIX = " presents the stronger case."
FORBIDDEN_TERMS = (
    "hidden hypothesis",
    "posterior steering",
    "q_h",
    "q_y",
    "h_true",
    "h_false",
    "h_target",
    "y_true",
    "y_false",
)
FORBIDDEN_UNLESS_IN_PROMPT = ("posterior", "steering")
H_MIN_CHARS = 4  # shorter hidden answers ("Yes") are not substring-checked, as in the release
TEACHER_ORDER = "grounded-adjudication-v1"  # salt of the seeded order the teacher reads the options in

_EVIDENCE_LINE = re.compile(r'^Debater (A|B) evidence: "(.+)"$')
_CHECK_LINE = re.compile(r"^Check: (.+)$")
_CONCLUSION_LINE = re.compile(r"^Conclusion: (Debater A|Debater B) presents the stronger case\.?$")
_QUOTE_TAG = re.compile(r"</?(?:v_quote|u_quote|quote)>", re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_LETTER_BANS = (
    re.compile(r"(?i)answer\s*:\s*[AB]\b"),
    re.compile(r"\b(?:answer|Answer|option|Option|choice|Choice)\s+\(?[AB]\)?(?![A-Za-z])"),
    re.compile(r"\(\s*[AB]\s*\)"),
)
_HARMONY = re.compile(r"<\|[^|]*\|>")
_TAG = re.compile(r"</?[A-Za-z_][A-Za-z0-9_]*>")

ADJUDICATION_SCHEMA = {
    "dataset": pl.Utf8,
    "pair_id": pl.Int64,
    "mode": pl.Utf8,  # honest / adversarial: the transcripts' mode
    "true_position": pl.Utf8,  # A / B: the debater who defended Y_true
    "teacher": pl.Utf8,  # the model that wrote it (verifier.adjudication.teacher, or the architecture's V_base)
    "protocol": pl.Utf8,  # told / blind-first (verifier.adjudication.protocol)
    "text": pl.Utf8,  # the L_lm target in debater names (fine-tuning appends each row's "Answer: X"); null: unresolved
    "raw": pl.Utf8,  # the accepted generation (unresolved: the last attempt's)
    "attempt": pl.Int32,  # 0-based attempt that wrote `text` (blind-first: 0, 1 blind; 2, 3 with the note); null: unresolved
    "tier": pl.Utf8,  # blind / gold (blind-first: whether the accepted prompt named the answer) / told; null: unresolved
    "failures": pl.List(pl.Utf8),  # every rejected attempt: "attempt N (tier): reason"
    "model_answer": pl.Utf8,  # told: letter of an answer line the model wrote itself (cut); null if none
    "status": pl.Utf8,  # ok / fallback (told: text built from the quote counts) / unresolved (blind-first: L_fc only)
    "reason": pl.Utf8,  # why fallback or unresolved; null for ok
}

REJECTED_SCHEMA = {
    "dataset": pl.Utf8,
    "pair_id": pl.Int64,
    "mode": pl.Utf8,
    "status": pl.Utf8,  # the selection status of the row
    "reason": pl.Utf8,  # why no adjudication was written
}


@dataclass(frozen=True)
class AdjudicationSettings:
    max_new_tokens: int = 96
    protocol: str = "told"  # PROTOCOLS

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"verifier.adjudication.protocol must be one of {list(PROTOCOLS)}, got {self.protocol!r}")


def debater_of(true_position: str) -> str:
    if true_position not in ("A", "B"):
        raise ValueError(f"true_position must be A or B, got {true_position!r}")
    return f"Debater {true_position}"


# ------------------------------------------------------------------ told
def adjudication_messages(
    transcript: str, question: str, options: tuple[str, str], true_position: str
) -> list[dict[str, str]]:
    """Protocol `told`: public transcript, q_m, the correct answer's text and debater; the assistant turn
    prefilled with PREFILL. Takes public material only, by construction."""
    answer = options[0] if true_position == "A" else options[1]
    user = REQUEST.format(
        transcript=transcript.strip(),
        question=question.strip(),
        answer=answer.strip(),
        debater=debater_of(true_position),
    )
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": user},
        {"role": "assistant", "content": PREFILL},
    ]


_ANSWER_LINE = re.compile(
    r"^[\s*#>_-]*(?:final\s+)?answer\s*(?:is\s*)?[:\-]\s*[*\s(\"']*([AB])?(?![A-Za-z])", re.IGNORECASE | re.MULTILINE
)
_TAGS = re.compile(r"</?(?:thinking|argument|adjudication)>", re.IGNORECASE)
_ECHO = re.compile(r"(?:debate transcript:|question:|round \d+\b|debater [ab] defends:)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")


def clean_adjudication(raw: str) -> tuple[str, str | None]:
    """(body, the letter of an answer line the model wrote or None). The body starts with PREFILL and stops
    before the model's own answer line, a repeated section label or a copied prompt heading; without an
    answer line it ends at the last complete sentence (the token budget may have cut it)."""
    # The answer line is looked for in the continuation alone: it may be the model's very first words.
    text = _TAGS.sub("", raw.strip())
    letter = None
    match = _ANSWER_LINE.search(text)
    if match:
        letter = match.group(1).upper() if match.group(1) else None
        text = text[: match.start()]
    text = f"{PREFILL} {text}"
    # A section label seen a second time, or the prompt's own headings, mean the model has started to loop
    # or to copy its request: the adjudication ends there.
    seen: set[str] = set()
    lines = []
    for line in (" ".join(line.split()) for line in text.splitlines()):
        if _ECHO.match(line):
            break
        labels = [label for label in SECTION_LABELS if label in line]
        if any(label in seen for label in labels):
            line = line[: min(line.index(label) for label in labels if label in seen)].strip()
            if line:
                lines.append(line)
            break
        seen.update(labels)
        if line:
            lines.append(line)
    body = "\n".join(lines)
    ends = list(_SENTENCE_END.finditer(body))
    # Without an answer line of its own the model may have run into the token budget mid-sentence.
    if match is None and ends and ends[-1].end() != len(body):
        cut = body[: ends[-1].end()]
        if content_words(cut) >= MIN_WORDS:
            body = cut
    return body.strip(), letter


def content_words(body: str) -> int:
    for label in SECTION_LABELS:
        body = body.replace(label, " ")
    return len(body.split())


def quote_counts(arguments: list[dict] | None) -> dict[str, tuple[int, int]]:
    """Debater -> (verified quotes, unverified quotes) over all rounds."""
    counts = {"A": [0, 0], "B": [0, 0]}
    for arg in arguments or []:
        counts[arg["debater"]][0] += arg["verified_quotes"]
        counts[arg["debater"]][1] += arg["quotes"] - arg["verified_quotes"]
    return {d: (v, u) for d, (v, u) in counts.items()}


def fallback_adjudication(arguments: list[dict] | None, true_position: str) -> str:
    """The explicit stand-in when the model wrote nothing usable: grounded in the quote marks only."""
    counts = quote_counts(arguments)
    evidence = "; ".join(f"Debater {d} cites {v} verified and {u} unverified quotes" for d, (v, u) in counts.items())
    return f"Evidence: {evidence}.\nConclusion: the answer Debater {true_position} defends is the correct one."


def told_rows(lm: Any, todo: list[dict], settings: AdjudicationSettings, source: str) -> list[dict]:
    conversations = [
        adjudication_messages(r["transcript"], r["q_m"], options_for(r, r["true_position"]), r["true_position"])
        for r in todo
    ]
    params = GenerationParams(max_new_tokens=settings.max_new_tokens, do_sample=False)
    outputs = lm.generate(conversations, params, desc=f"adjudications {source}") if todo else []
    out = []
    for r, texts in zip(todo, outputs):
        raw = texts[0]
        body, model_answer = clean_adjudication(raw)
        status, reason = "ok", None
        if content_words(body) < MIN_WORDS:
            status = "fallback"
            reason = f"fewer than {MIN_WORDS} words of adjudication after clean-up: text built from the quote counts"
            body = fallback_adjudication(r["arguments"], r["true_position"])
        out.append(
            {
                "text": body,
                "raw": raw,
                "attempt": 0,
                "tier": "told",
                "failures": [],
                "model_answer": model_answer,
                "status": status,
                "reason": reason,
            }
        )
    return out


# ------------------------------------------------------------------ blind-first
def teacher_position(pair_id: int) -> str:
    """Where Y_true is shown in the one judge prompt the teacher reads, seeded per pair (the release's
    grounded_teacher_orientation: a fixed A would let a letter prior pass for a blind success)."""
    digest = hashlib.sha256(f"{pair_id}|{TEACHER_ORDER}".encode()).digest()
    return "A" if digest[0] % 2 == 0 else "B"


def teacher_messages(row: dict, gold: bool) -> list[dict[str, str]]:
    """Protocol `blind-first`: the release's judge prompt of the pair (public material only) and the
    adjudication instruction, with the grading note when `gold`."""
    options = options_for(row, row["true_position"])
    view = transcript_view(row["q_m"], options, row["arguments"])
    shown = (
        (row["y_true"], row["y_false"]) if teacher_position(row["pair_id"]) == "A" else (row["y_false"], row["y_true"])
    )
    user = release_content(row["q_m"], *shown, view, "train") + TEACHER_INSTRUCTION
    if gold:
        user += GOLD_NOTE.format(answer_text=row["y_true"], gold_debater=debater_of(row["true_position"]))
    return [{"role": "system", "content": TEACHER_SYSTEM}, {"role": "user", "content": user}]


def parse_reply(text: str) -> tuple[dict[str, str], str, str]:
    """(debater -> evidence span, check, winning debater) from the release's four-line schema, taken from
    the last four consecutive lines of the reply that parse (a reasoning model may wrap them in prose)."""
    lines = [line.strip() for line in _QUOTE_TAG.sub("", text.replace("\r", "\n")).split("\n") if line.strip()]
    error = f"expected the four-line schema, got {len(lines)} non-empty lines"
    for start in range(len(lines) - 4, -1, -1):
        window = lines[start : start + 4]
        evidence = {}
        for line, letter in zip(window, "AB"):
            match = _EVIDENCE_LINE.match(line)
            if match and match.group(1) == letter and match.group(2).strip():
                evidence[f"Debater {letter}"] = match.group(2).strip()
        check, conclusion = _CHECK_LINE.match(window[2]), _CONCLUSION_LINE.match(window[3])
        if len(evidence) == 2 and check and conclusion:
            return evidence, check.group(1).strip(), conclusion.group(1)
        error = f"no four consecutive lines in the schema (last tried: {window[0][:60]!r} ...)"
    raise ValueError(error)


def round_texts(arguments: list[dict], debater: str) -> list[str]:
    """One debater's public argument per round, quote tags removed (the release's _grounded_round_texts)."""
    return [_QUOTE_TAG.sub("", a["text"]) for a in arguments if f"Debater {a['debater']}" == debater]


def span_evidence(span: str, row: dict, debater: str) -> dict[str, Any]:
    """The audited evidence entry of one span (the release's grounded_span_audit); ValueError when unusable."""
    norm = quote_key(span)
    if not SPAN_CHARS[0] <= len(norm) <= SPAN_CHARS[1]:
        raise ValueError(f"{debater} span has {len(norm)} normalised characters, outside {SPAN_CHARS}")
    if not any(norm in quote_key(text) for text in round_texts(row["arguments"], debater)):
        raise ValueError(f"{debater} span is not a verbatim run of one round of that debater's arguments")
    other = DEBATERS[1] if debater == DEBATERS[0] else DEBATERS[0]
    if norm in quote_key("\n".join(round_texts(row["arguments"], other))):
        raise ValueError(f"{debater} span also occurs in {other}'s arguments")
    for field in ("q_m", "y_true", "y_false"):
        if norm in quote_key(row[field]):
            raise ValueError(f"{debater} span is text from {field}, not transcript evidence")
    return {"span": span, "verified": norm in quote_key(row["context"] or "")}


def render_analysis(evidence: dict[str, dict[str, Any]], check: str, winner: str) -> str:
    """The target text, written by code from the audited parts (the release's render_grounded_analysis)."""
    lines = [
        f'{d}\'s key evidence: "{evidence[d]["span"]}" ({"verified" if evidence[d]["verified"] else "unverified"})'
        for d in DEBATERS
    ]
    return "\n".join([*lines, f"Check: {check}", f"Conclusion: {winner}{CONCLUSION_SUFFIX}"])


def hidden_leak(analysis: str, prompt: str, row: dict) -> str | None:
    """Why the text leaks the hidden question, or None: a reject-only predicate, it adds nothing to a target
    (the release's H-hygiene): q_h may never appear, H_true / H_false only where the transcript has them."""
    low, prompt_low = analysis.lower(), prompt.lower()
    q_h = row["q_h"].strip().lower()
    if len(q_h) >= H_MIN_CHARS and q_h in low:
        return "the text holds the hidden question"
    for field in ("h_true", "h_false"):
        h = row[field].strip().lower()
        if len(h) >= H_MIN_CHARS and h in low and h not in prompt_low:
            return f"the text holds the hidden answer {field} that the transcript does not"
    return None


def validate_reply(text: str, row: dict, prompt: str) -> str:
    """The rendered adjudication of one teacher reply, or ValueError naming the first failed audit (module
    docstring)."""
    evidence_spans, check, winner = parse_reply(text)
    gold = debater_of(row["true_position"])
    if winner != gold:
        raise ValueError(f"conclusion names {winner} but the Y_true debater is {gold}")
    evidence = {d: span_evidence(evidence_spans[d], row, d) for d in DEBATERS}
    if quote_key(evidence[DEBATERS[0]]["span"]) == quote_key(evidence[DEBATERS[1]]["span"]):
        raise ValueError("both evidence spans are the same text")
    if '"' in check:
        raise ValueError("the check holds a double quote")
    if not CHECK_CHARS[0] <= len(check) <= CHECK_CHARS[1]:
        raise ValueError(f"the check has {len(check)} characters, outside {CHECK_CHARS}")
    sentences = [s for s in _SENTENCE_SPLIT.split(check) if s.strip()]
    if not CHECK_SENTENCES[0] <= len(sentences) <= CHECK_SENTENCES[1]:
        raise ValueError(f"the check has {len(sentences)} sentences, outside {CHECK_SENTENCES}")
    for debater in DEBATERS:
        if debater not in check:
            raise ValueError(f"the check does not name {debater}")
    analysis = render_analysis(evidence, check, winner)
    if _HARMONY.search(analysis) or _TAG.search(analysis) or "```" in analysis:
        raise ValueError("the text holds a control token, a tag or a code fence")
    if any(p.search(analysis) for p in _LETTER_BANS):
        raise ValueError("the text names an answer letter")
    if not ANALYSIS_CHARS[0] <= len(analysis) <= ANALYSIS_CHARS[1]:
        raise ValueError(f"the text has {len(analysis)} characters, outside {ANALYSIS_CHARS}")
    low = analysis.lower()
    for term in FORBIDDEN_TERMS:
        if term in low:
            raise ValueError(f"the text holds the experiment term {term!r}")
    for term in FORBIDDEN_UNLESS_IN_PROMPT:
        if term in low and term not in prompt.lower():
            raise ValueError(f"the text brings in the term {term!r}")
    leak = hidden_leak(analysis, prompt, row)
    if leak:
        raise ValueError(leak)
    return analysis


def blind_first_rows(lm: Any, todo: list[dict], settings: AdjudicationSettings, source: str) -> list[dict]:
    """The release's ladder for every row at once: attempt k runs on the rows no earlier attempt resolved."""
    results: dict[int, dict] = {}
    failures: dict[int, list[str]] = {i: [] for i in range(len(todo))}
    last_raw: dict[int, str] = {}
    for attempt, (tier, temperature) in enumerate(ATTEMPTS):
        pending = [i for i in range(len(todo)) if i not in results]
        if not pending:
            break
        conversations = [teacher_messages(todo[i], gold=tier == "gold") for i in pending]
        params = (
            GenerationParams(max_new_tokens=settings.max_new_tokens, do_sample=False)
            if temperature is None
            else GenerationParams(
                max_new_tokens=settings.max_new_tokens,
                do_sample=True,
                temperature=temperature,
                top_p=RETRY_TOP_P,
                seed=attempt,
            )
        )
        outputs = lm.generate(conversations, params, desc=f"adjudications {source} (attempt {attempt}, {tier})")
        for i, conversation, texts in zip(pending, conversations, outputs):
            last_raw[i] = texts[0]
            try:
                text = validate_reply(texts[0], todo[i], conversation[1]["content"])
            except ValueError as err:
                failures[i].append(f"attempt {attempt} ({tier}): {err}")
                continue
            results[i] = {"text": text, "raw": texts[0], "attempt": attempt, "tier": tier}
    out = []
    for i in range(len(todo)):
        done = results.get(i)
        row = {"failures": failures[i], "model_answer": None}
        if done:
            out.append(row | done | {"status": "ok", "reason": None})
        else:
            out.append(
                row
                | {
                    "text": None,
                    "raw": last_raw.get(i),
                    "attempt": None,
                    "tier": None,
                    "status": "unresolved",
                    "reason": f"no attempt of {len(ATTEMPTS)} passed the audits: trained on L_fc only",
                }
            )
    return out


# ------------------------------------------------------------------ both
def adjudicate_rows(
    lm: Any,
    selected: pl.DataFrame,
    pairs: pl.DataFrame,
    splits: pl.DataFrame,
    settings: AdjudicationSettings,
    *,
    teacher: str = "",
    source: str = "transcripts",
) -> tuple[list[dict], list[dict]]:
    """(rows of ADJUDICATION_SCHEMA, rows of REJECTED_SCHEMA) for one mode's selected transcripts; `lm` is
    anything with LanguageModel.generate, `teacher` its name."""
    sel = trained_selection(selected, splits, source=source)
    # q_h, H_true and H_false reach no prompt: prompts are built from the public columns; the audit
    # columns only verify spans and reject leaking replies.
    public = pairs.select(*PUBLIC_PAIR_COLUMNS, *AUDIT_PAIR_COLUMNS).with_columns(_paired=pl.lit(True))
    rows = sel.join(public, on="pair_id", how="left").sort("pair_id").to_dicts()
    rejected, todo = [], []
    for r in rows:
        reason = r["skip"]
        if reason is None and not r["_paired"]:
            reason = "pair not in the pairs file"
        if reason is None and not (r["transcript"] or "").strip():
            reason = "no transcript"
        if reason is None:
            todo.append(r)
        else:
            rejected.append(
                {
                    "dataset": r["dataset"],
                    "pair_id": r["pair_id"],
                    "mode": r["mode"],
                    "status": r["status"],
                    "reason": reason,
                }
            )
    write = blind_first_rows if settings.protocol == "blind-first" else told_rows
    written = write(lm, todo, settings, source) if todo else []
    out = [
        {
            "dataset": r["dataset"],
            "pair_id": r["pair_id"],
            "mode": r["mode"],
            "true_position": r["true_position"],
            "teacher": teacher,
            "protocol": settings.protocol,
            **w,
        }
        for r, w in zip(todo, written)
    ]
    return out, rejected


def adjudicate_transcripts(
    selected: str | Path,
    pairs: str | Path,
    split: str | Path,
    model: ModelRef,
    out: str | Path,
    rejected_out: str | Path,
    *,
    settings: AdjudicationSettings,
    cache: str | None,
) -> pl.DataFrame:
    """Write one adjudication per selected transcript that fine-tuning trains on (`out`) and every other
    selected row with its reason (`rejected_out`); `model`: the teacher."""
    sel = pl.read_parquet(selected)
    with open_model(model, cache=cache) as lm:
        rows, rejected = adjudicate_rows(
            lm, sel, pl.read_parquet(pairs), pl.read_parquet(split), settings, teacher=model.name, source=str(selected)
        )
    frame = pl.DataFrame(rows, schema=ADJUDICATION_SCHEMA) if rows else pl.DataFrame(schema=ADJUDICATION_SCHEMA)
    write_parquet(frame, ADJUDICATION_SCHEMA, out)
    gone = pl.DataFrame(rejected, schema=REJECTED_SCHEMA) if rejected else pl.DataFrame(schema=REJECTED_SCHEMA)
    write_parquet(gone, REJECTED_SCHEMA, rejected_out)
    statuses = dict(frame.group_by("status").len().iter_rows()) if frame.height else {}
    tiers = dict(frame.group_by("attempt").len().iter_rows()) if frame.height else {}
    disagree = frame.filter(
        pl.col("model_answer").is_not_null() & (pl.col("model_answer") != pl.col("true_position"))
    ).height
    log.info(
        "%s: %d adjudications by %s (%s; status %s; by attempt %s), %d rows rejected; the model wrote a "
        "contradicting answer line (cut) in %d",
        selected,
        frame.height,
        model.name,
        settings.protocol,
        statuses,
        tiers,
        gone.height,
        disagree,
    )
    for r in frame.filter(pl.col("status") != "ok").iter_rows(named=True):
        log.warning("pair %d: %s: %s; %s", r["pair_id"], r["status"], r["reason"], "; ".join(r["failures"]))
    for reason, count in gone.group_by("reason").len().iter_rows() if gone.height else []:
        log.info("rejected: %d rows: %s", count, reason)
    return frame
