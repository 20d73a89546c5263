"""The one Markdown table renderer, and the tables that use it."""

import polars as pl
import pytest

from debate_audit.data.markdown import frame_table, markdown_table


def test_markdown_table_layout_escapes_pipes_and_newlines():
    text = markdown_table(["model", "response"], [["m|1", "line one\nline  two"], ["m2", None]])
    assert text.splitlines() == [
        "| model | response |",
        "| --- | --- |",
        "| m\\|1 | line one line two |",
        "| m2 |  |",
    ]
    assert text.endswith("\n")


def test_frame_table_formats_floats_and_keeps_ints():
    frame = pl.DataFrame({"target": ["adv"], "cr": [0.123456], "n": [7]})
    assert frame_table(frame, floats=2).splitlines()[2] == "| adv | 0.12 | 7 |"


def test_a_row_with_the_wrong_number_of_cells_is_an_error():
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        markdown_table(["a", "b"], [["only one"]])


def test_no_other_module_builds_a_markdown_separator_row():
    # One renderer: a second one would reintroduce drifting formats (three existed before).
    from pathlib import Path

    import debate_audit

    root = Path(debate_audit.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.name != "markdown.py" and ('"---"' in p.read_text() or "|---|" in p.read_text())
    ]
    assert offenders == []
