"""The one Markdown table renderer of the project (CW-POR tables, Table 1, the audit summary, Table 3 and
the cost plan all go through it), so every table escapes cells and formats numbers the same way."""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl


def cell(value: object, floats: int = 3) -> str:
    """A table cell: None -> empty, floats with `floats` decimals, text on one line with `|` escaped
    (a newline or pipe inside a debate response would otherwise break the table)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{floats}f}"
    return " ".join(str(value).split()).replace("|", "\\|")


def ci_cell(value: float | None, low: float | None, high: float | None) -> str:
    """A point estimate with its interval, "0.412 [0.35, 0.47]"; "n/a" when undefined, no interval when
    it is undefined (no resamples)."""
    if value is None or math.isnan(value):
        return "n/a"
    if low is None or math.isnan(low):
        return f"{value:.3f}"
    return f"{value:.3f} [{low:.2f}, {high:.2f}]"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], floats: int = 3) -> str:
    """A GitHub-flavoured Markdown table, ending in a newline; every row must have one cell per header."""
    for i, row in enumerate(rows):
        if len(row) != len(headers):
            raise ValueError(f"markdown table row {i} has {len(row)} cells for {len(headers)} columns")
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c, floats) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def frame_table(frame: pl.DataFrame, floats: int = 3) -> str:
    """A Polars frame as a Markdown table, its columns as headers."""
    return markdown_table(frame.columns, list(frame.iter_rows()), floats)
