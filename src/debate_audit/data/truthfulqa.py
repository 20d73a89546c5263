"""TruthfulQA (generation config, validation split, 817 questions) -> data/truthfulqa.parquet."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

import polars as pl

from .fields import MISSING, choice_error, first_error, shown, text_error, text_list_error
from .io import DataError, no_valid_rows, read_text, write_parquet, write_rejected
from .normalise import NORMALISATION, text_key

log = logging.getLogger(__name__)

TRUTHFULQA_SCHEMA = {
    "question_id": pl.Int64,  # 0-based row in the source (CSV row order = HF validation order)
    "type": pl.Utf8,  # "Adversarial" or "Non-Adversarial"
    "category": pl.Utf8,  # one of TruthfulQA's 38 categories
    "question": pl.Utf8,
    "best_answer": pl.Utf8,  # the reference's best correct answer
    "correct_answers": pl.List(pl.Utf8),  # all reference correct answers
    "incorrect_answers": pl.List(pl.Utf8),  # reference falsehoods (persuasive agents defend one), as released
    # incorrect answers the release also lists as correct (normalise.text_key): never defended as a falsehood
    "contested_answers": pl.List(pl.Utf8),
    "source": pl.Utf8,  # URL the answer was checked against
}

CSV_COLUMNS = {
    "Type": "type",
    "Category": "category",
    "Question": "question",
    "Best Answer": "best_answer",
    "Correct Answers": "correct_answers",
    "Incorrect Answers": "incorrect_answers",
    "Source": "source",
}
# Early releases have no Source column. The current release leaves `source` empty on two of its 817 rows
# (582, 602): those rows stay (the papers use all 817), with a null source and a warning naming them.
OPTIONAL_COLUMNS = {"Source"}
TYPES = {"Adversarial", "Non-Adversarial"}


def _split(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(";") if part.strip()]


def contested_answers(record: dict) -> list[str]:
    """The incorrect answers that are also the best or a correct answer of the same row."""
    true = {text_key(answer) for answer in [record["best_answer"], *record["correct_answers"]]}
    return [answer for answer in record["incorrect_answers"] if text_key(answer) in true]


def _field_error(record: dict) -> str | None:
    """Why a field of the record has the wrong type or value (a hub record's fields come as the dataset
    wrote them; a CSV row's are texts by construction)."""
    empty = [
        field
        for field in ("type", "category", "question", "best_answer")
        if isinstance(record.get(field, MISSING), str) and not record[field].strip()
    ]
    if empty:
        return f"empty required field(s) {empty}"
    source = record.get("source", MISSING)
    return first_error(
        choice_error("type", record.get("type", MISSING), sorted(TYPES)),
        *(text_error(field, record.get(field, MISSING)) for field in ("category", "question", "best_answer")),
        *(text_list_error(field, record.get(field, MISSING)) for field in ("correct_answers", "incorrect_answers")),
        None if source is None else text_error("source", source, empty_ok=True),
    )


def _validate(record: dict) -> str | None:
    error = _field_error(record)
    if error:
        return error
    if not record["incorrect_answers"]:
        return "incorrect_answers is empty (a persuasive agent needs a falsehood to defend)"
    if not record["correct_answers"]:
        return "correct_answers is empty"
    # The persuasive agent may be told to defend any incorrect answer: one that is the best answer makes
    # an "override" a win for the truth. A correct answer listed as incorrect too (the release's "Unknown"
    # on rows 347 and 354) is only never defended; the row keeps its other falsehoods.
    best = text_key(record["best_answer"])
    if any(text_key(answer) == best for answer in record["incorrect_answers"]):
        return f"best_answer {record['best_answer']!r} is also among incorrect_answers ({NORMALISATION})"
    if len(contested_answers(record)) == len(record["incorrect_answers"]):
        return f"every incorrect answer is also a correct answer ({NORMALISATION}): no falsehood to defend"
    return None


def _answers_key(record: dict) -> tuple:
    return (
        text_key(record["best_answer"]),
        sorted(map(text_key, record["correct_answers"])),
        sorted(map(text_key, record["incorrect_answers"])),
    )


def _repeated(record: dict, kept: dict[str, dict]) -> str | None:
    """Why a valid row is a second copy of a kept question (None: the first of its question)."""
    first = kept.get(text_key(record["question"]))
    if first is None:
        return None
    differ = "" if _answers_key(first) == _answers_key(record) else "; the two rows' answers differ"
    return (
        f"the same question as row {first['question_id']} ({NORMALISATION}): the first valid row of a "
        f"question is kept{differ}"
    )


def records_from_csv(location: str | Path) -> tuple[list[dict | None], list[dict]]:
    """(records, rejected): one entry per data row; a row whose field count differs from the header's
    is None in records and rejected with its line, so no column can shift into another."""
    text = read_text(location, "CSV")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [name.strip() for name in next(reader)]
    except (StopIteration, csv.Error) as err:
        raise DataError(f"{location}: not a CSV file (no header row)") from err
    missing = [c for c in CSV_COLUMNS if c not in header and c not in OPTIONAL_COLUMNS]
    if missing:
        raise DataError(f"{location}: not a TruthfulQA CSV file: missing column(s) {missing}; found {header}")
    index = {name: header.index(name) for name in CSV_COLUMNS if name in header}
    records: list[dict | None] = []
    rejected: list[dict] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            raise DataError(f"{location}: line {reader.line_num}: not a CSV row ({err})") from err
        if not row:  # a blank line is no record
            continue
        number = len(records)
        if len(row) != len(header):
            records.append(None)
            rejected.append(
                {
                    "file": str(location),
                    "row": number,
                    "key": row[index["Question"]] if len(row) > index["Question"] else "",
                    "reason": f"{location} row {number} (line {reader.line_num}): {len(row)} fields, the header has "
                    f"{len(header)} (a row cut short, or an unquoted comma)",
                }
            )
            continue
        record = {ours: row[index[theirs]].strip() if theirs in index else None for theirs, ours in CSV_COLUMNS.items()}
        record["correct_answers"] = _split(record["correct_answers"])
        record["incorrect_answers"] = _split(record["incorrect_answers"])
        records.append(record)
    if "Source" not in index:
        log.info("%s: no Source column (an early release); source is null", location)
    return records, rejected


HUB_FIELDS = ("type", "category", "question", "best_answer", "correct_answers", "incorrect_answers", "source")


def records_from_hub(dataset_id: str, revision: str | None) -> list[dict]:
    """The hub split's rows with their fields as the dataset holds them (checked row by row, _validate)."""
    import datasets

    split = datasets.load_dataset(dataset_id, "generation", split="validation", revision=revision)
    missing = [field for field in HUB_FIELDS if field not in split.column_names]
    if missing:
        raise DataError(
            f"{dataset_id}: not TruthfulQA's generation config: missing column(s) {missing}; found {split.column_names}"
        )
    return [{field: r[field] for field in HUB_FIELDS} for r in split]


def prepare_truthfulqa(
    out: str | Path,
    rejected: str | Path,
    *,
    path: str | None = None,
    hf_id: str | None = None,
    revision: str | None = None,
) -> pl.DataFrame:
    if (path is None) == (hf_id is None):
        raise DataError("datasets.truthfulqa: give exactly one of 'path' (CSV, local or URL) or 'hf_id'")
    where = path or hf_id
    records, bad = records_from_csv(path) if path else (records_from_hub(hf_id, revision), [])
    kept: dict[str, dict] = {}  # question (text_key) -> its kept row
    for row, record in enumerate(records):
        if record is None:  # rejected while parsing
            continue
        reason = _validate(record) or _repeated(record, kept)
        if reason:
            bad.append(
                {
                    "file": where,
                    "row": row,
                    "key": record["question"]
                    if isinstance(record.get("question"), str)
                    else shown(record.get("question")),
                    "reason": f"{where} row {row}: {reason}",
                }
            )
            continue
        if record["source"] is not None and not record["source"].strip():
            log.warning("truthfulqa: %s row %d: empty field 'source' (kept, source null)", where, row)
            record["source"] = None
        record["contested_answers"] = contested_answers(record)
        if record["contested_answers"]:
            log.warning(
                "truthfulqa: %s row %d: %s listed as correct and as incorrect (kept; never defended as a falsehood)",
                where,
                row,
                record["contested_answers"],
            )
        kept[text_key(record["question"])] = {"question_id": row, **record}
    bad.sort(key=lambda r: r["row"])
    write_rejected(bad, rejected)
    for r in bad:
        log.warning("truthfulqa: rejected %s", r["reason"])
    if not kept:
        raise no_valid_rows(where, len(bad), rejected)
    frame = pl.DataFrame(list(kept.values()), schema=TRUTHFULQA_SCHEMA)
    write_parquet(frame, TRUTHFULQA_SCHEMA, out)
    log.info(
        "truthfulqa: %d questions kept, %d rejected, %d categories from %s",
        frame.height,
        len(bad),
        frame["category"].n_unique(),
        where,
    )
    return frame
