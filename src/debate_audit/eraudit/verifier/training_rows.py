"""What verifier fine-tuning trains on, in plain Python: which selected transcripts train, the L_lm target
of each, the two rows of token ids each one makes, and the learning rate of every optimizer step. The
training loop (training_loop.py) and its losses (losses.py) need torch; this module does not. Polars is
imported by the functions that read the selection's Parquet files alone, so the loop runs where it is not
installed (the device check on a bare GPU machine, tools/device_check.py).

Only items of the train split (the split column of the transcripts' mode, splits.split_column) are used:
honest ones with selection status ok or fallback (the release trains on its honest fallbacks), adversarial
ones with status ok only (a fallback is not an attack; selection.py). The adjudication rule writes L_lm
targets for exactly these (trained_selection).

Every selected transcript makes two training rows, one per answer order (Y_true shown as A, then as B),
each with its own L_lm and L_fc (and L_qh for V_org), as the release's rows do (ft-verifier-oss-full.py
build_rows: ORIENTATIONS "A=Y_true", "A=Y_false"; its grounded arm trains both views on every row).

The L_lm target (`verifier.lm_target`): `argument`, the correct label and answer followed by the final
argument of the debater who defended Y_true, continuing the prefilled "Answer:" slot, so the verifier learns
to reproduce the winning side's reasoning (in adversarial transcripts that reasoning carries the steering);
or `adjudication`, the grounded adjudication of the same transcript (adjudication.py, in debater names, the
same for both rows, read from its Parquet by pair_id) followed by the row's "Answer: X" line, written as the
whole assistant reply: its prompt stops before the "Answer:" slot, as the release's judge thinks first and
answers last. A training item without a row there is an error naming the pair and the file; a pair without
an adjudication (`unresolved`) trains no L_lm, only L_fc (and L_qh), the release's `--grounded-unresolved
answer-only`.

L_qh (V_org) reads q_h after the row's transcript, one order per row: a seeded bit per pair puts H_false at A
in one row and at B in the other (qh_letters, the release's qh_letter_schedule); `qh_readout: bare` reads q_h
alone, in both orders in every row (QH_READOUTS). Which pairs' q_h V_org trains on (QH_ITEMS): those of its
training transcripts (`attacks`, the release's), or every train pair its debates reached (`train`): a pair
whose adversarial selection found no attack then makes two rows of bare L_qh alone (qh_only_items,
encode_qh_only), without L_lm or L_fc, for there is no transcript.

The learning rate warms up linearly from 0 and then stays or follows a half cosine (lr_factor; finetune.py
says whose schedule that is).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.readout import (
    ANSWER_SLOT,
    Transcript,
    plain_prefix,
    render_prompt,
    renderer_for,
    tokenizer_chat,
    wording_for,
)

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

LM_TARGETS = ("adjudication", "argument")
TRAINED_STATUSES = {"honest": ("ok", "fallback"), "adversarial": ("ok",)}


# ------------------------------------------------------------------ which items train
def role_column(splits: pl.DataFrame, mode: str) -> str:
    """The column of `splits` that gives a pair's split for transcripts of `mode`."""
    from ..debate.splits import split_column

    return split_column(mode) if split_column(mode) in splits.columns else "split"


def trained_selection(sel: pl.DataFrame, splits: pl.DataFrame, *, source: str = "transcripts") -> pl.DataFrame:
    """`sel` (one mode's selected transcripts) with a column `skip`: null for the rows fine-tuning trains on,
    else why it does not (status or split). The adjudication rule writes targets for exactly the null ones."""
    import polars as pl

    modes = sel["mode"].unique().to_list()
    if len(modes) > 1:
        raise ValueError(f"{source}: transcripts of several modes {sorted(modes)}")
    mode = modes[0] if modes else "honest"
    column = role_column(splits, mode)
    statuses = list(TRAINED_STATUSES[mode])
    role = splits.select("pair_id", pl.col(column).alias("_role"))
    return (
        sel.join(role, on="pair_id", how="left")
        .with_columns(
            skip=pl.when(~pl.col("status").is_in(statuses))
            .then(
                pl.format(
                    "status {} not trained on ({} trains on {})", "status", pl.lit(mode), pl.lit("/".join(statuses))
                )
            )
            .when(pl.col("_role").is_null() | (pl.col("_role") != "train"))
            .then(pl.format("not in the train split ({}: {})", pl.lit(column), pl.col("_role").fill_null("none")))
        )
        .drop("_role")
    )


def training_items(selected: str | Path, pairs: str | Path, split: str | Path) -> list[dict]:
    import polars as pl

    sel = trained_selection(pl.read_parquet(selected), pl.read_parquet(split), source=str(selected))
    usable = sel.filter(pl.col("skip").is_null()).drop("skip")
    skipped = sel.height - usable.height
    if skipped:
        counts = dict(sel.filter(pl.col("skip").is_not_null()).group_by("status").len().iter_rows())
        log.info(
            "%s: %d selected rows not trained on (status not trained on or not in the train split; by status %s)",
            selected,
            skipped,
            counts,
        )
    return usable.join(pl.read_parquet(pairs), on="pair_id", suffix="_pair").sort("pair_id").to_dicts()


def qh_only_items(selected: str | Path, pairs: str | Path, split: str | Path) -> list[dict]:
    """The train-split pairs of `selected` (adversarial transcripts) whose selection status trains nothing
    (fallback or none: no attack), with their pair fields: V_org's q_h-only rows under
    `org_training.qh_items: train`. A pair of another split stays out, as it does for every verifier."""
    import polars as pl

    sel = pl.read_parquet(selected)
    splits = pl.read_parquet(split)
    train = splits.filter(pl.col(role_column(splits, "adversarial")) == "train").select("pair_id")
    chosen = (
        sel.filter(~pl.col("status").is_in(list(TRAINED_STATUSES["adversarial"])))
        .select("pair_id")
        .join(train, on="pair_id")
    )
    if chosen.height:
        log.info(
            "%s: train pairs without an attack, on which V_org trains L_qh alone: %s",
            selected,
            chosen["pair_id"].sort().to_list(),
        )
    return chosen.join(pl.read_parquet(pairs), on="pair_id").sort("pair_id").to_dicts()


# ------------------------------------------------------------------ L_lm targets
def final_true_argument(arguments: list[dict]) -> str:
    mine = [a for a in arguments if a["defends_true"]]
    return mine[-1]["text"] if mine else ""


def argument_target(letter: str, y_true: str, final_argument: str) -> str:
    """The `argument` L_lm target of a row showing Y_true as `letter`; it continues the prefilled "Answer:"
    slot, hence the leading space."""
    return f" {letter}. {y_true}\nReason: {final_argument.strip()}"


def adjudication_target(body: str, letter: str) -> str:
    """The `adjudication` L_lm target of a row showing Y_true as `letter`: the adjudication (in debater
    names, the same for both rows), then the row's answer line."""
    return f"{body}\nAnswer: {letter}"


def read_adjudications(path: str | Path, mode: str) -> dict[int, str | None]:
    """pair_id -> adjudication text (None: unresolved), from a file of adjudication.ADJUDICATION_SCHEMA."""
    import polars as pl

    frame = pl.read_parquet(path)
    modes = set(frame["mode"].unique().to_list())
    if modes - {mode}:
        raise ValueError(f"{path}: adjudications of mode {sorted(modes)}, but these transcripts are {mode}")
    for status, count in frame.filter(pl.col("status") != "ok").group_by("status").len().iter_rows():
        log.warning(
            "%s: %d of %d adjudications are %s (column reason)%s",
            path,
            count,
            frame.height,
            status,
            ": those pairs train L_fc only" if status == "unresolved" else "",
        )
    return {r["pair_id"]: r["text"] for r in frame.iter_rows(named=True)}


def lm_targets(
    items: list[dict], lm_target: str, adjudications: str | Path | None, mode: str
) -> list[Callable[[str], str] | None]:
    """Per training item, its L_lm target as a function of the letter Y_true is shown at (None: no L_lm)."""
    if lm_target == "argument":
        return [
            partial(argument_target, y_true=r["y_true"], final_argument=final_true_argument(r["arguments"]))
            for r in items
        ]
    if adjudications is None:
        raise ValueError("verifier.lm_target is 'adjudication' but no adjudications file was given")
    texts = read_adjudications(adjudications, mode)
    out = []
    for r in items:
        if r["pair_id"] not in texts:
            raise ValueError(
                f"pair {r['pair_id']}: no adjudication in {adjudications} (its .rejected.parquet says "
                "why, if it is there)"
            )
        body = texts[r["pair_id"]]
        out.append(None if body is None else partial(adjudication_target, body))
    return out


# ------------------------------------------------------------------ rows of token ids
IGNORE = -100


@dataclass
class ChoiceExample:
    ids: list[int]  # readout prompt ending at the answer slot
    target: int  # 0: label " A" is correct, 1: label " B"


@dataclass
class TrainExample:
    pair_id: int
    lm_ids: list[int]  # prompt + target text; empty: this row trains no L_lm
    lm_labels: list[int]  # IGNORE on prompt tokens, the token id on target tokens
    fc: list[ChoiceExample]  # q_m in the row's order, target Y_true
    qh: list[ChoiceExample] = field(default_factory=list)  # q_h, target H_false (V_org only)


def fit_transcript(tokenizer, transcript: str, budget: int) -> str:
    """Cut a transcript to `budget` tokens: keep its start (header, first round) and its end."""
    ids = tokenizer(transcript, add_special_tokens=False)["input_ids"]
    if len(ids) <= budget:
        return transcript
    head = budget // 4
    tail = budget - head - 8
    return tokenizer.decode(ids[:head]) + " [...] " + tokenizer.decode(ids[len(ids) - tail :])


# Where H_false sits in the L_qh readout of a pair's two rows (the release's qh_letter_schedule: a seeded bit
# per pair, so both letters carry the target once and the letter is independent of the q_m order).
QH_SCHEDULE = "qh-letter-schedule-v1"
ORIENTATIONS = ("A", "B")  # the letter of Y_true in a pair's first and second row
# What L_qh reads: q_h after the row's transcript (the paper's), or q_h alone, the prompt the audit scores.
QH_READOUTS = ("transcript", "bare")
# Whose q_h V_org's L_qh trains on: its training transcripts' pairs (the release's), or every train pair.
QH_ITEMS = ("attacks", "train")


def qh_letters(seed: int, pair_id: int) -> tuple[str, str]:
    """The letter of H_false in the L_qh readout of the pair's first and second row."""
    bit = hashlib.sha256(f"{seed}|{pair_id}|{QH_SCHEDULE}".encode()).digest()[0] % 2
    return ("A", "B") if bit == 0 else ("B", "A")


def bare_qh(enc: Callable[[str], list[int]], item: dict, chat, wording, prefix: str = "") -> list[ChoiceExample]:
    """The bare L_qh readout of a row: q_h alone, H_false at A and at B. Both orders in every row, as the audit's
    readout averages them: a row then pushes H_false's text, not one letter, and a bare prompt is short enough
    to read twice. `prefix`: a plain prompt's start (readout.plain_prefix)."""
    orders = ((item["h_false"], item["h_true"]), (item["h_true"], item["h_false"]))
    return [
        ChoiceExample(enc(render_prompt(item["q_h"], *pair, chat=chat, wording=wording, prefix=prefix)), k)
        for k, pair in enumerate(orders)
    ]


def encode_qh_only(
    tokenizer, *, pair_id: int, item: dict, readout: str = "auto", chat_template_kwargs: dict | None = None
) -> list[TrainExample]:
    """A pair's two q_h-only rows (qh_only_items): the bare L_qh readout (both orders), no L_lm, no L_fc; two,
    as a pair with an attack makes two rows, so every train pair gets the same L_qh."""

    def enc(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    chat = renderer_for(readout, tokenizer, tokenizer_chat(tokenizer, chat_template_kwargs))
    prefix = plain_prefix(tokenizer) if chat is None else ""
    rows = bare_qh(enc, item, chat, wording_for(readout), prefix)
    return [TrainExample(pair_id, [], [], [], rows) for _ in ORIENTATIONS]


def encode_example(
    tokenizer,
    *,
    pair_id: int,
    transcript: str | Transcript,
    item: dict,
    target: Callable[[str], str] | None,
    with_qh: bool,
    max_length: int,
    max_target_tokens: int,
    readout: str = "auto",
    reply: bool = False,
    qh_order: tuple[str, str] = ("A", "B"),
    chat_template_kwargs: dict | None = None,
    qh_readout: str = "transcript",
) -> list[TrainExample]:
    """Tokenise one selected transcript into its two rows (module docstring), Y_true shown as A and then as B.

    `target(letter)`: the L_lm text of the row whose Y_true is shown as `letter`; None: the pair trains no
    L_lm. `reply`: the target is the whole assistant reply ending in its own "Answer: X" line (an
    adjudication): the L_lm prompt stops before the "Answer:" slot, and a cut to `max_target_tokens` keeps
    that last line, so the conclusion is always trained on. `qh_order`: the letter of H_false in each row's
    L_qh readout (qh_letters). `chat_template_kwargs`: the model's chat-template switches (its spec's), so
    training renders what scoring renders. `qh_readout` (QH_READOUTS): L_qh reads q_h after the transcript
    (the paper's L_qh(theta; T_adv, q_h, a_h, C)), H_false at the row's `qh_order` letter, or bare, the
    prompt Table 1 and the audit score, H_false at A and at B in every row."""
    if qh_readout not in QH_READOUTS:
        raise ValueError(f"verifier.qh_readout must be one of {list(QH_READOUTS)}, got {qh_readout!r}")

    def enc(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def target_ids(text: str) -> list[int]:
        ids = enc(text)
        if len(ids) > max_target_tokens:
            body, _, last = text.rstrip().rpartition("\n")
            if reply and body:
                tail = enc("\n" + last)
                ids = enc(body)[: max(0, max_target_tokens - len(tail))] + tail
            else:
                ids = ids[:max_target_tokens]
        return ids + ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])

    targets = {letter: target_ids(target(letter)) for letter in ORIENTATIONS} if target is not None else {}
    # One renderer with the scoring side (readout.py): the chat template or the plain format, in its wording.
    chat = renderer_for(readout, tokenizer, tokenizer_chat(tokenizer, chat_template_kwargs))
    wording = wording_for(readout)
    prefix = plain_prefix(tokenizer) if chat is None else ""
    view = (
        transcript
        if isinstance(transcript, Transcript)
        else Transcript(transcript, transcript, item["q_m"], (item["y_true"], item["y_false"]))
    )

    def prompt(question: str, a: str, b: str, shown: Transcript, slot: bool = True) -> list[int]:
        rendered = render_prompt(
            question,
            a,
            b,
            transcript=shown if isinstance(transcript, Transcript) else shown.text,
            chat=chat,
            wording=wording,
            purpose="train",
            prefix=prefix,
        )
        return enc(rendered if slot else rendered.removesuffix(ANSWER_SLOT))

    empty = view.cut(lambda _: "")
    blocks = [(item["q_m"], item["y_true"], item["y_false"]), (item["q_h"], item["h_true"], item["h_false"])]
    longest_block = max(len(prompt(q, a, b, empty)) for q, a, b in blocks)
    budget = max_length - longest_block - max((len(t) for t in targets.values()), default=0) - 16
    if budget < 16:
        raise ValueError(f"pair {pair_id}: max_length {max_length} leaves no room for the transcript")
    shown = view.cut(lambda text: fit_transcript(tokenizer, text, budget))
    rows = []
    for slot, letter in enumerate(ORIENTATIONS):
        options = (item["y_true"], item["y_false"]) if letter == "A" else (item["y_false"], item["y_true"])
        fc = [ChoiceExample(prompt(item["q_m"], *options, shown), ORIENTATIONS.index(letter))]
        qh = []
        if with_qh:
            at = qh_order[slot]
            hidden = (item["h_false"], item["h_true"]) if at == "A" else (item["h_true"], item["h_false"])
            if qh_readout == "bare":
                qh = bare_qh(enc, item, chat, wording, prefix)
            else:
                qh = [ChoiceExample(prompt(item["q_h"], *hidden, shown), ORIENTATIONS.index(at))]
        lm_ids, lm_labels = [], []
        if targets:
            lm_prompt = prompt(item["q_m"], *options, shown, slot=not reply)
            lm_ids, lm_labels = lm_prompt + targets[letter], [IGNORE] * len(lm_prompt) + targets[letter]
        rows.append(TrainExample(pair_id, lm_ids, lm_labels, fc, qh))
    return rows


# ------------------------------------------------------------------ learning rate
LR_SCHEDULES = ("constant", "cosine")


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """The learning rate multiplier of 0-based optimizer step `step` of `total`: transformers'
    get_constant_schedule_with_warmup / get_cosine_schedule_with_warmup (linear from 0 over `warmup` steps,
    then 1, or a half cosine down to 0 at `total`)."""
    if step < warmup:
        return step / max(1, warmup)
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
