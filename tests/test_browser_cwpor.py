"""The browser's CW-POR view with several judges and a rebuttal round: every judge's reply, both rounds."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from test_browser import Page, browser, rows_of, write_cwpor  # noqa: F401 (browser: the Chromium fixture)

from debate_audit.views.browse import build_payload, write_browser


def write_rebuttal(root: Path, cw: dict) -> dict:
    """A second judge "j2" of the single-turn debates, and a neutral-only rebuttal round judged by m1."""
    judgments = pl.read_parquet(cw["judgments"])
    second = judgments.with_columns(pl.lit("j2").alias("judge_model"), pl.lit("j2 reply").alias("raw_judgment"))
    responses = pl.read_parquet(cw["responses"])
    round1 = responses.with_columns(pl.lit("neutral").alias("protocol"), pl.lit(1).alias("round"))
    round2 = responses.filter(pl.col("role") == "neutral").with_columns(
        pl.concat_str(pl.lit("rebuttal of "), pl.col("question_id").cast(pl.Utf8)).alias("response"),
        pl.lit("neutral").alias("protocol"),
        pl.lit(2).alias("round"),
    )
    rebutted = judgments.with_columns(
        pl.lit("neutral").alias("protocol"), pl.lit("reply after the rebuttal").alias("raw_judgment")
    )
    paths = {"second": root / "j2.parquet", "debate": root / "rebuttal.parquet", "rebutted": root / "rj.parquet"}
    second.write_parquet(paths["second"])
    pl.concat([round1, round2]).write_parquet(paths["debate"])
    rebutted.write_parquet(paths["rebutted"])
    return paths


def test_payload_has_every_judge_and_both_rounds(tmp_path):
    cw = write_cwpor(tmp_path, 4, planted_row=None)
    more = write_rebuttal(tmp_path, cw)
    payload = build_payload(
        questions=cw["questions"],
        responses=[cw["responses"], more["debate"]],
        judgments=[cw["judgments"], more["second"], more["rebutted"]],
        eraudit={},
    )
    rows = rows_of(payload)
    assert len(rows) == 12
    assert {(r["judge_model"], r["protocol"]) for r in rows} == {("m1", "single"), ("j2", "single"), ("m1", "neutral")}
    single = next(r for r in rows if r["question_id"] == 0 and r["protocol"] == "single")
    assert single["answer_a"].startswith("neutral reply 0") and "Opening" not in single["answer_a"]
    rebutted = next(r for r in rows if r["question_id"] == 0 and r["protocol"] == "neutral")
    # question 0: correct at A; the neutral agent rebutted, the persuasive one did not
    assert rebutted["answer_a"].startswith("Opening: neutral reply 0") and rebutted["answer_a"].endswith(
        "Rebuttal: rebuttal of 0"
    )
    assert rebutted["answer_b"].startswith("Opening: persuasive reply 0") and "Rebuttal" not in rebutted["answer_b"]


def test_judge_and_protocol_filters_and_every_judges_reply_in_chromium(browser, tmp_path):  # noqa: F811
    cw = write_cwpor(tmp_path, 4, planted_row=None)
    more = write_rebuttal(tmp_path, cw)
    out = tmp_path / "browse" / "index.html"
    write_browser(
        out,
        questions=cw["questions"],
        responses=[cw["responses"], more["debate"]],
        judgments=[cw["judgments"], more["second"], more["rebutted"]],
        eraudit={},
    )
    page = Page(browser, out)
    assert page.page.inner_text("#cwpor-count") == "12 of 12 judgments"
    page.select("#f-judge", "m1")
    page.select("#f-protocol", "single")
    page.page.fill("#f-text", "Question number 1:")
    card = page.page.locator("[data-testid=debate]")
    assert card.count() == 1
    card.locator("summary").click()
    others = page.page.locator("[data-testid=other-judge]")
    assert others.count() == 1 and others.get_attribute("data-judge") == "j2"
    assert "j2 reply" in others.inner_text()
    page.select("#f-protocol", "neutral")
    card = page.page.locator("[data-testid=debate]")
    card.locator("summary").click()
    rounds = page.page.locator("[data-testid=rounds]").inner_text()
    assert "Opening: neutral reply 1" in rounds and "Rebuttal: rebuttal of 1" in rounds
    assert page.page.locator("[data-testid=judge-reply]").inner_text() == "reply after the rebuttal"
    assert page.count("[data-testid=other-judges]") == 0  # only m1 judged the rebuttal
    assert not page.errors, page.errors
    page.close()
