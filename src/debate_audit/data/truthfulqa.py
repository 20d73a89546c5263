"""TruthfulQA (generation config, validation split, 817 questions) -> data/truthfulqa.parquet."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

import polars as pl

from .io import DataError, read_text, write_parquet, write_rejected

log = logging.getLogger(__name__)

TRUTHFULQA_SCHEMA = {
    "question_id": pl.Int64,  # 0-based row in the source (CSV row order = HF validation order)
    "type": pl.Utf8,  # "Adversarial" or "Non-Adversarial"
    "category": pl.Utf8,  # one of TruthfulQA's 38 categories
    "question": pl.Utf8,
    "best_answer": pl.Utf8,  # the reference's best correct answer
    "correct_answers": pl.List(pl.Utf8),  # all reference correct answers
    "incorrect_answers": pl.List(pl.Utf8),  # reference falsehoods (persuasive agents defend one)
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
TYPES = {"Adversarial", "Non-Adversarial"}


def _split(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(";") if part.strip()]


def _validate(record: dict, row: int, where: str) -> str | None:
    for field in ("type", "category", "question", "best_answer"):
        if not str(record.get(field) or "").strip():
            return f"{field} is empty"
    if record["type"] not in TYPES:
        return f"type {record['type']!r} is not one of {sorted(TYPES)}"
    if not record["incorrect_answers"]:
        return "incorrect_answers is empty (a persuasive agent needs a falsehood to defend)"
    if not record["correct_answers"]:
        return "correct_answers is empty"
    return None


def records_from_csv(location: str | Path) -> list[dict]:
    reader = csv.DictReader(io.StringIO(read_text(location)))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"{location}: missing column(s) {missing}; found {reader.fieldnames}")
    records = []
    for row in reader:
        record = {ours: (row[theirs] or "").strip() for theirs, ours in CSV_COLUMNS.items()}
        record["correct_answers"] = _split(record["correct_answers"])
        record["incorrect_answers"] = _split(record["incorrect_answers"])
        records.append(record)
    return records


def records_from_hub(dataset_id: str, revision: str | None) -> list[dict]:
    import datasets

    split = datasets.load_dataset(dataset_id, "generation", split="validation", revision=revision)
    return [
        {
            "type": r["type"],
            "category": r["category"],
            "question": r["question"],
            "best_answer": r["best_answer"],
            "correct_answers": list(r["correct_answers"]),
            "incorrect_answers": list(r["incorrect_answers"]),
            "source": r["source"],
        }
        for r in split
    ]


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
    records = records_from_csv(path) if path else records_from_hub(hf_id, revision)
    kept, bad = [], []
    for row, record in enumerate(records):
        reason = _validate(record, row, where)
        if reason:
            # CSV row numbers count the header as line 1, so data row r sits on line r + 2.
            bad.append({"row": row, "key": record.get("question", ""), "reason": f"{where} row {row}: {reason}"})
            continue
        kept.append({"question_id": row, **record})
    if not kept:
        raise DataError(f"{where}: no valid rows ({len(bad)} rejected)")
    frame = pl.DataFrame(kept, schema=TRUTHFULQA_SCHEMA)
    write_parquet(frame, TRUTHFULQA_SCHEMA, out)
    write_rejected(bad, rejected)
    log.info("truthfulqa: %d questions kept, %d rejected, %d categories from %s",
             frame.height, len(bad), frame["category"].n_unique(), where)
    return frame
