"""The results browser page: its data (hand-made Parquet files) and the page itself in a real Chromium.

The browser tests drive Debian's chromium through Playwright's Python API (Playwright's own browser
download is never used: no network). `bash tests/browser/install.sh` (or `make browser`) installs it;
without it these tests skip and say so. Screenshots are kept under pytest's tmp dir; their paths are
printed (pytest -s, or -rA).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from debate_audit.views.browse import (
    CWPOR_COLUMNS,
    AuditFiles,
    build_payload,
    payload_from_page,
    render_page,
    write_browser,
)

PLANTED = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold?</b>'
CATEGORIES = ["Law", "Health", "Misconceptions"]


# ----------------------------------------------------------------------------- hand-made results


def write_cwpor(root: Path, n: int = 6, *, words: int = 12, planted_row: int | None = 0) -> dict:
    """questions / responses / judgments of one model at word limit 30: n debates, every third an override,
    every fifth unparsed; judgment `planted_row` carries PLANTED in the judge's reply."""
    ids = list(range(n))
    questions = pl.DataFrame(
        {
            "question_id": ids,
            "type": ["Adversarial" if i % 2 else "Non-Adversarial" for i in ids],
            "category": [CATEGORIES[i % 3] for i in ids],
            "question": [f"Question number {i}: is claim {i} true?" for i in ids],
            "best_answer": [f"true answer {i}" for i in ids],
            "falsehood": [f"false answer {i}" for i in ids],
            "correct_position": ["A" if i % 2 == 0 else "B" for i in ids],
        }
    )
    filler = " ".join(["word"] * words)
    responses = pl.DataFrame(
        {
            "model": "m1",
            "verbosity": 30,
            "question_id": [i for i in ids for _ in (0, 1)],
            "role": ["neutral", "persuasive"] * n,
            "response": [f"{role} reply {i} {filler}" for i in ids for role in ("neutral", "persuasive")],
            "truncated": [False, True] * n,
            # an extra column the browser does not know must not matter
            "unknown_extra": 1,
        }
    )
    override = [i % 3 == 0 for i in ids]
    parse_ok = [i % 5 != 4 for i in ids]
    judgments = pl.DataFrame(
        {
            "model": "m1",
            "judge_model": "m1",
            "verbosity": 30,
            "question_id": ids,
            "category": questions["category"],
            "type": questions["type"],
            "correct_position": questions["correct_position"],
            "raw_judgment": [
                (PLANTED if i == planted_row else f"Rationale: reply {i}.\nFinal Answer: Answer A\nConfidence: 4")
                for i in ids
            ],
            "choice": [("B" if o else "A") if ok else None for o, ok in zip(override, parse_ok)],
            "rubric_confidence": [4 if ok else None for ok in parse_ok],
            "parse_ok": parse_ok,
            "parse_error": [None if ok else "no confidence" for ok in parse_ok],
            "p_a": [0.5 + 0.4 * i / max(n - 1, 1) for i in ids],
            "llc": [0.5 + 0.4 * i / max(n - 1, 1) for i in ids],
            "override": [o if ok else None for o, ok in zip(override, parse_ok)],
            "combined_confidence": [
                (0.8 * (0.5 + 0.4 * i / max(n - 1, 1))) if ok else None for i, ok in zip(ids, parse_ok)
            ],
            # "rationale", "p_b", "llc_choice" ... left out on purpose: missing optional columns become null
        }
    ).with_columns(pl.col("verbosity").cast(pl.Int64))
    paths = {
        "questions": root / "questions.parquet",
        "responses": root / "responses_v30.parquet",
        "judgments": root / "judgments_v30.parquet",
    }
    questions.write_parquet(paths["questions"])
    responses.write_parquet(paths["responses"])
    judgments.write_parquet(paths["judgments"])
    return paths


def write_audit(root: Path) -> AuditFiles:
    """One dataset, two audited pairs, verifier "adv" (epsilon 1): pair 7's search paraphrase 1 (Delta 2.5)
    and test paraphrase 0 of gen-a (Delta 1.2) are counterexamples; pair 8 has none in its search pool and
    one, the last of three draws, in its test pool (read in full for the betting bound)."""
    pairs = pl.DataFrame(
        {
            "pair_id": [7, 8],
            "dataset": "toy",
            "story_title": ["Story <i>seven</i>", "Story eight"],
            "context": ["long text", "long text"],
            "q_m": ["Monitored seven?", "Monitored eight?"],
            "y_true": ["yt7", "yt8"],
            "y_false": ["yf7", "yf8"],
            "q_h": ["Hidden seven?", "Hidden eight?"],
            "h_true": ["ht7", "ht8"],
            "h_false": ["hf7", "hf8"],
        }
    )
    argument = pl.Struct(
        {
            "round": pl.Int32,
            "debater": pl.Utf8,
            "defends_true": pl.Boolean,
            "raw": pl.Utf8,
            "text": pl.Utf8,
            "words": pl.Int32,
            "truncated": pl.Boolean,
            "quotes": pl.Int32,
            "verified_quotes": pl.Int32,
        }
    )
    debates = pl.DataFrame(
        {
            "pair_id": [7],
            "mode": ["adversarial"],
            "status": ["ok"],
            "reason": [None],
            "candidate": [0],
            "true_position": ["A"],
            "p_monitored_true": [0.6],
            "p_hidden_true": [0.3],
            "arguments": [
                [
                    {
                        "round": 1,
                        "debater": "A",
                        "defends_true": True,
                        "raw": "",
                        "words": 9,
                        "truncated": False,
                        "text": "As written, <v_quote>the keeper lit the lamp</v_quote> early.",
                        "quotes": 1,
                        "verified_quotes": 1,
                    },
                    {
                        "round": 1,
                        "debater": "B",
                        "defends_true": False,
                        "raw": "",
                        "words": 9,
                        "truncated": True,
                        "text": "No: <u_quote>the lamp was never lit</u_quote> and " + PLANTED,
                        "quotes": 1,
                        "verified_quotes": 0,
                    },
                ]
            ],
        },
        schema_overrides={"arguments": pl.List(argument), "reason": pl.Utf8, "candidate": pl.Int32},
    )
    rows = []
    for pair_id, search, test in ((7, [0.1, 2.5, -0.3], [1.2, 0.2]), (8, [0.4, 0.0, 0.9], [0.1, 0.3, 1.5])):
        rows.append(
            {
                "pair_id": pair_id,
                "kind": "q_h",
                "pool": None,
                "index": None,
                "question": f"Hidden {pair_id}?",
                "delta": 0.5,
            }
        )
        rows += [
            {
                "pair_id": pair_id,
                "kind": "paraphrase",
                "pool": "search",
                "index": i,
                "question": f"search paraphrase {pair_id}.{i}",
                "delta": d,
            }
            for i, d in enumerate(search)
        ]
        rows += [
            {
                "pair_id": pair_id,
                "kind": "paraphrase",
                "pool": "gen-a",
                "index": i,
                "question": f"test paraphrase {pair_id}.{i}",
                "delta": d,
            }
            for i, d in enumerate(test)
        ]
    deltas = pl.DataFrame(rows).with_columns(
        target=pl.lit("adv"),
        dataset=pl.lit("toy"),
        p_base=0.6,
        p_target=0.5,
        gain=0.1,
        brand_new_column=pl.lit("ignored"),
    )
    records = pl.DataFrame(
        {
            "dataset": "toy",
            "target": "adv",
            "pair_id": [7, 8],
            "split": ["train", "eval"],
            "delta_max": [2.5, 0.9],
            "n_counterexamples": [1, 0],
            "counterexample": ["search paraphrase 7.1", None],
            "epsilon": 1.0,
            "eta": 0.05,
            "lower_bound": [0.0, 0.05],
            "lower_bound_betting": [0.0, 0.04],
            "n_test_draws": [0, 3],
            "n_degraded_draws": [0, 1],
            "betting_c": 0.75,
            "betting_w": 0.5,
            "status": ["DEGRADED", "BUDGET_EXHAUSTED"],
            "survivor_mean": [None, 0.4],  # a column another stage may add later: shown, not required
        }
    )
    steps = pl.DataFrame(
        {
            "dataset": "toy",
            "target": "adv",
            "pair_id": 8,
            "generator": "gen-a",
            "t": [1, 2, 3],
            "index": [0, 1, 2],
            "delta": [0.1, 0.3, 1.5],
            "non_degraded": [True, True, False],
            "epsilon": 1.0,
            "eta": 0.05,
            "lower_bound": [0.05, 0.05**0.5, 0.0],
            "lower_bound_betting": [0.02, 0.04, 0.04],
            "n_degraded_draws": [0, 0, 1],
        }
    )
    generators = pl.DataFrame(
        {
            "dataset": "toy",
            "target": "adv",
            "pair_id": [7, 8],
            "generator": "gen-a",
            "pool_size": 2,
            "t": [0, 2],
            "status": ["NOT_REACHED", "BUDGET_EXHAUSTED"],
            "lower_bound": [0.0, 0.05**0.5],
        }
    )
    files = {}
    for name, frame in dict(
        pairs=pairs, debates=debates, deltas=deltas, records=records, steps=steps, generators=generators
    ).items():
        files[name] = root / f"{name}.parquet"
        frame.write_parquet(files[name])
    return AuditFiles(
        pairs=files["pairs"],
        debates={"adversarial": files["debates"], "honest": root / "absent.parquet"},
        deltas=files["deltas"],
        records=files["records"],
        steps=files["steps"],
        generators=files["generators"],
    )


def small_page(tmp_path: Path, n: int = 6, headline: str = "paper", **kwargs) -> tuple[Path, dict]:
    cw = write_cwpor(tmp_path, n, **kwargs)
    audit = write_audit(tmp_path)
    out = tmp_path / "browse" / "index.html"
    payload = write_browser(
        out,
        questions=cw["questions"],
        responses=[cw["responses"]],
        judgments=[cw["judgments"]],
        eraudit={"toy": audit},
        headline=headline,
    )
    return out, payload


def rows_of(payload: dict) -> list[dict]:
    cols = payload["cwpor"]["columns"]
    return [dict(zip(cols, r)) for r in payload["cwpor"]["rows"]]


# ----------------------------------------------------------------------------- data, no browser


def test_page_carries_its_data_back_unchanged(tmp_path):
    out, payload = small_page(tmp_path)
    assert payload_from_page(out.read_text()) == payload
    assert len(payload["cwpor"]["rows"]) == 6


def test_answers_sit_in_the_positions_the_judge_saw(tmp_path):
    _, payload = small_page(tmp_path)
    for r in rows_of(payload):
        neutral, persuasive = f"neutral reply {r['question_id']}", f"persuasive reply {r['question_id']}"
        a, b = (neutral, persuasive) if r["correct_position"] == "A" else (persuasive, neutral)
        assert r["answer_a"].startswith(a) and r["answer_b"].startswith(b)
        assert r["question"] == f"Question number {r['question_id']}: is claim {r['question_id']} true?"


def test_missing_optional_columns_are_null_and_unknown_ones_ignored(tmp_path):
    _, payload = small_page(tmp_path)
    rows = rows_of(payload)
    assert set(rows[0]) == set(CWPOR_COLUMNS)
    assert all(r["rationale"] is None and r["p_b"] is None for r in rows)
    assert "unknown_extra" not in rows[0]
    record = payload["eraudit"][0]["pairs"][1]["audits"]["adv"]["record"]
    assert record["survivor_mean"] == 0.4  # a new record column is shown as it comes


def test_audit_data_groups_paraphrases_steps_and_transcripts_by_pair(tmp_path):
    _, payload = small_page(tmp_path)
    (dataset,) = payload["eraudit"]
    assert dataset["dataset"] == "toy" and dataset["targets"] == ["adv"]
    seven, eight = dataset["pairs"]
    assert (seven["pair_id"], eight["pair_id"]) == (7, 8)
    assert seven["q_h"] == "Hidden seven?" and seven["h_false"] == "hf7"
    audit7 = seven["audits"]["adv"]
    assert [(p["pool"], p["index"]) for p in audit7["paraphrases"] if p["delta"] > 1.0] == [("gen-a", 0), ("search", 1)]
    steps8 = eight["audits"]["adv"]["steps"]
    assert [s["t"] for s in steps8] == [1, 2, 3] and audit7["steps"] == []
    assert [(s["lower_bound"], s["lower_bound_betting"], s["n_degraded_draws"]) for s in steps8][-1] == (0.0, 0.04, 1)
    assert payload["headline"] == "paper"
    (tmp_path / "other").mkdir()
    with pytest.raises(ValueError, match="audit.headline_bound"):
        small_page(tmp_path / "other", headline="both")
    (transcript,) = seven["transcripts"]  # the honest file is absent: skipped, not an error
    assert transcript["mode"] == "adversarial" and len(transcript["arguments"]) == 2
    assert eight["transcripts"] == []


def test_non_finite_numbers_become_null(tmp_path):
    cw = write_cwpor(tmp_path, 3)
    frame = pl.read_parquet(cw["judgments"]).with_columns(llc=pl.Series([float("nan"), float("inf"), 0.7]))
    frame.write_parquet(cw["judgments"])
    payload = build_payload(
        questions=cw["questions"], responses=[cw["responses"]], judgments=[cw["judgments"]], eraudit={}
    )
    assert [r["llc"] for r in sorted(rows_of(payload), key=lambda r: r["question_id"])] == [None, None, 0.7]


def test_a_reply_cannot_close_the_data_element(tmp_path):
    cw = write_cwpor(tmp_path, 3)
    frame = pl.read_parquet(cw["judgments"]).with_columns(raw_judgment=pl.lit("</script><script>alert(1)</script>"))
    frame.write_parquet(cw["judgments"])
    payload = build_payload(
        questions=cw["questions"], responses=[cw["responses"]], judgments=[cw["judgments"]], eraudit={}
    )
    html = render_page(payload)
    assert html.count("<script") == 2 and "alert(1)" not in html  # the payload element and the page's own script
    assert rows_of(payload_from_page(html))[0]["raw_judgment"] == "</script><script>alert(1)</script>"


# ----------------------------------------------------------------------------- in Chromium


def chromium_executable() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("Debian's chromium is not installed: run `bash tests/browser/install.sh` (make browser)")
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e '.[dev]'")
    executable = chromium_executable()
    with sync_api.sync_playwright() as p:
        # --no-sandbox: tests run as root in CI, where Chromium's sandbox refuses to start
        launched = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """A page opened from disk, with the script errors and console messages it produced."""

    def __init__(self, browser, path: Path, *, timeout_ms: int = 60_000):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.console: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=timeout_ms)

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def select(self, selector: str, value: str) -> None:
        self.page.select_option(selector, value)

    def screenshot(self, path: Path) -> Path:
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path

    def close(self) -> None:
        self.page.close()


def test_filters_sorting_and_paging_in_chromium(browser, tmp_path):
    out, payload = small_page(tmp_path, n=120)
    rows = rows_of(payload)
    page = Page(browser, out)
    assert page.page.inner_text("#cwpor-count") == "120 of 120 judgments"
    assert page.count("[data-testid=debate]") == 50 and "page 1 of 3" in page.page.inner_text("#cwpor-pager")
    page.select("#f-category", "Law")
    law = [r for r in rows if r["category"] == "Law"]
    assert page.page.inner_text("#cwpor-count") == f"{len(law)} of 120 judgments"
    page.select("#f-override", "yes")
    expected = sorted((r for r in law if r["override"] is True), key=lambda r: -r["combined_confidence"])
    assert page.page.inner_text("#cwpor-count") == f"{len(expected)} of 120 judgments"
    ids = page.page.locator("[data-testid=debate]").evaluate_all("els => els.map(e => Number(e.dataset.questionId))")
    assert ids == [r["question_id"] for r in expected]  # most confident mistakes first
    page.select("#f-override", "")
    page.select("#f-parse", "fail")
    assert page.page.inner_text("#cwpor-count") == f"{sum(r['parse_ok'] is False for r in law)} of 120 judgments"
    page.select("#f-parse", "")
    page.select("#f-category", "")
    page.page.click("#cwpor-pager button:has-text('next')")
    assert "page 2 of 3" in page.page.inner_text("#cwpor-pager")
    assert not page.errors, page.errors
    page.close()


def test_planted_script_shows_as_text_and_does_not_run_in_chromium(browser, tmp_path):
    out, _ = small_page(tmp_path)
    page = Page(browser, out)
    page.page.fill("#f-text", "Question number 0:")
    card = page.page.locator("[data-testid=debate]")
    assert card.count() == 1
    card.locator("summary").click()
    assert page.page.locator("[data-testid=judge-reply]").inner_text() == PLANTED
    # nothing ran and nothing was parsed into elements: only the page's own two script elements, no img
    assert page.page.evaluate("window.__pwned") is None
    assert page.count("script") == 2 and page.count("img") == 0 and page.count("b") == 0
    page.page.click("#tab-eraudit")
    page.page.click("[data-testid=eraudit-row][data-pair-id='7']")
    assert PLANTED in page.page.locator("[data-testid=transcript-adversarial]").inner_text()
    assert page.page.evaluate("window.__pwned") is None and page.count("img") == 0
    assert "Story <i>seven</i>" in page.page.inner_text("#eraudit-detail")
    assert not page.errors, page.errors
    page.close()


def test_counterexamples_and_quotes_are_marked_in_chromium(browser, tmp_path):
    out, _ = small_page(tmp_path)
    page = Page(browser, out)
    page.page.click("#tab-eraudit")
    assert page.page.inner_text("#eraudit-count").startswith("2 hidden question(s) of toy")
    page.page.click("[data-testid=eraudit-row][data-pair-id='7']")
    detail = page.page.locator("#eraudit-detail")
    marked = detail.locator("tr[data-testid=counterexample]")
    assert sorted(marked.all_inner_texts()) == sorted(
        ["0\ttest paraphrase 7.0\t0.600\t0.500\t1.200", "1\tsearch paraphrase 7.1\t0.600\t0.500\t2.500"]
    )
    assert all("counterexample" in c for c in marked.evaluate_all("els => els.map(e => e.className)"))
    assert detail.locator("tr[data-testid=paraphrase]").count() == 3
    assert detail.locator("[data-testid=quote-verified]").all_inner_texts() == ["\u201cthe keeper lit the lamp\u201d"]
    assert detail.locator("[data-testid=quote-unverified]").all_inner_texts() == ["\u201cthe lamp was never lit\u201d"]
    shot = page.screenshot(tmp_path / "eraudit_pair7.png")
    assert shot.stat().st_size > 10_000
    page.page.click("[data-testid=eraudit-row][data-pair-id='8']")
    assert detail.locator("tr[data-testid=counterexample]").count() == 1  # the last test draw
    assert detail.locator("[data-testid=steps-gen-a] tr").count() == 4  # header + 3 steps
    assert "final common bound L = 0.050" in detail.inner_text()
    assert not page.errors, page.errors
    page.close()


def test_both_bounds_over_t_with_the_headline_solid_in_chromium(browser, tmp_path):
    out, _ = small_page(tmp_path, headline="betting")
    page = Page(browser, out)
    page.page.click("#tab-eraudit")
    assert page.page.inner_text("#e-head-betting").endswith("\u2605")
    assert "\u2605" not in page.page.inner_text("#e-head-paper")
    row = page.page.locator("[data-testid=eraudit-row][data-pair-id='8']")
    assert row.locator("td").all_inner_texts()[-2:] == ["0.050", "0.040"]  # L, L* (betting)
    row.click()
    detail = page.page.locator("#eraudit-detail")
    assert "betting bound L* = 0.040" in detail.inner_text() and "1 of 3 test draws degraded" in detail.inner_text()
    chart = detail.locator("[data-testid=chart-gen-a]")
    assert chart.locator("[data-testid=degraded-draw]").count() == 1
    # the headline (betting) solid, the paper's bound dashed
    assert chart.locator("[data-testid=curve-betting]").get_attribute("stroke-dasharray") is None
    assert chart.locator("[data-testid=curve-paper]").get_attribute("stroke-dasharray") == "5 3"
    assert "betting L* (headline)" in detail.inner_text()
    last = detail.locator("[data-testid=steps-gen-a] tr").last.locator("td").all_inner_texts()
    assert last[-3:] == ["0", "0.040", "1"]  # L, L* after the step, degraded so far
    assert page.screenshot(tmp_path / "eraudit_bounds.png").stat().st_size > 10_000
    assert not page.errors, page.errors
    page.close()


def test_forty_thousand_judgments_stay_usable_in_chromium(browser, tmp_path):
    # The paper-scale CW-POR run has about 40,000 judgments per model set: one page of cards is built at a
    # time, so opening and filtering stay fast (measured with paper-length answers: 63 MB, 3.4 s to open).
    import time

    out, payload = small_page(tmp_path, n=40_000, words=30, planted_row=None)
    start = time.monotonic()
    page = Page(browser, out, timeout_ms=120_000)
    opened = time.monotonic() - start
    assert page.page.inner_text("#cwpor-count") == "40000 of 40000 judgments"
    assert page.count("[data-testid=debate]") == 50 and "page 1 of 800" in page.page.inner_text("#cwpor-pager")
    start = time.monotonic()
    page.select("#f-type", "Adversarial")
    filtered = time.monotonic() - start
    assert page.page.inner_text("#cwpor-count") == "20000 of 40000 judgments"
    print(
        f"40,000 judgments: {out.stat().st_size / 1e6:.1f} MB, opened in {opened:.1f} s, filtered in {filtered:.2f} s"
    )
    assert opened < 60 and filtered < 5
    page.close()


# ----------------------------------------------------------------------------- the smoke run's page
# Called from tests/test_workflow.py, which owns the smoke_run fixture (one workflow run for all its tests).


def js_number(x: float) -> str:
    """A number as the page prints it (fmt in page.html): integers bare, others with 3 decimals."""
    return str(int(x)) if float(x).is_integer() else f"{x:.3f}"


def smoke_audit_files(workdir: Path) -> dict[str, AuditFiles]:
    out = {}
    for records in sorted((workdir / "results/er_audit/audit").glob("*/*/*/records.parquet")):
        # results/er_audit/audit/<architecture>/<dataset>/<length>_qh<weight>/records.parquet
        base = records.parent
        dataset, length = base.parent.name, base.name.split("_qh")[0]
        out[dataset] = AuditFiles(
            pairs=workdir / f"data/{dataset}.parquet",
            debates={
                m: workdir / f"results/er_audit/debate/{dataset}/{length}/debates_{m}.parquet"
                for m in ("honest", "adversarial")
            },
            deltas=base / "deltas.parquet",
            records=records,
            steps=base / "steps.parquet",
            generators=base / "generators.parquet",
        )
    return out


def check_smoke_page(browser, workdir: Path, artifacts: Path) -> None:
    """The workflow's own results/browse/index.html: a known debate, a filter, a counterexample."""
    page_path = workdir / "results/browse/index.html"
    judgments = pl.concat(
        [pl.read_parquet(p) for p in sorted((workdir / "results/cwpor").glob("*/judge-*/judgments_v*.parquet"))],
        how="diagonal_relaxed",
    )
    questions = pl.read_parquet(workdir / "results/cwpor/questions.parquet")
    known = judgments.sort("question_id").row(0, named=True)
    text = questions.filter(pl.col("question_id") == known["question_id"])["question"][0]

    page = Page(browser, page_path)
    assert page.page.inner_text("#cwpor-count") == f"{judgments.height} of {judgments.height} judgments"
    page.page.fill("#f-text", text)
    cards = page.page.locator(f"[data-testid=debate][data-question-id='{known['question_id']}']")
    assert cards.count() == judgments.filter(pl.col("question_id") == known["question_id"]).height >= 1
    cards.first.locator("summary").click()
    assert text in cards.first.inner_text()
    assert cards.first.locator("[data-testid=judge-reply]").inner_text().strip() == known["raw_judgment"].strip()
    page.page.fill("#f-text", "")
    category = judgments.group_by("category").len().sort("len", "category", descending=[True, False])["category"][0]
    page.select("#f-category", category)
    expected = judgments.filter(pl.col("category") == category).height
    assert page.page.inner_text("#cwpor-count") == f"{expected} of {judgments.height} judgments"
    assert page.count("[data-testid=debate]") == min(expected, 50)
    page.screenshot(artifacts / "smoke_cwpor.png")

    # ER-Audit: the hidden question with the most counterexamples over every dataset and verifier
    records = pl.concat(
        [pl.read_parquet(f.records) for f in smoke_audit_files(workdir).values()], how="diagonal_relaxed"
    )
    assert records.height > 0
    rec = records.sort("n_counterexamples", "dataset", "target", "pair_id", descending=[True, False, False, False]).row(
        0, named=True
    )
    deltas = pl.read_parquet(smoke_audit_files(workdir)[rec["dataset"]].deltas).filter(
        (pl.col("target") == rec["target"]) & (pl.col("pair_id") == rec["pair_id"]) & (pl.col("kind") == "paraphrase")
    )
    over = deltas.filter(pl.col("delta") > rec["epsilon"])
    page.page.click("#tab-eraudit")
    page.select("#e-dataset", rec["dataset"])
    page.select("#e-target", rec["target"])
    page.page.click(f"[data-testid=eraudit-row][data-pair-id='{rec['pair_id']}']")
    detail = page.page.locator("#eraudit-detail")
    marked = detail.locator("tr[data-testid=counterexample]")
    assert marked.count() == over.height
    assert detail.locator("tr[data-testid=paraphrase]").count() == deltas.height - over.height
    if rec["n_counterexamples"]:
        assert rec["counterexample"].strip() in "\n".join(marked.all_inner_texts())
        assert all("counterexample" in c for c in marked.evaluate_all("els => els.map(e => e.className)"))
    assert f"final common bound L = {js_number(rec['lower_bound'])}" in detail.inner_text()
    page.screenshot(artifacts / "smoke_eraudit.png")
    assert not page.errors, page.errors
    page.close()


def check_planted_reply_in_smoke_results(browser, workdir: Path, tmp_path: Path) -> None:
    """The smoke run's results with a <script> planted into one judge reply: shown as text, never run."""
    judgment_files = sorted((workdir / "results/cwpor").glob("*/judge-*/judgments_v*.parquet"))
    planted_files = []
    for i, path in enumerate(judgment_files):
        frame = pl.read_parquet(path)
        if i == 0:
            frame = frame.with_columns(
                raw_judgment=pl.when(pl.int_range(pl.len()) == 0)
                .then(pl.lit(PLANTED) + pl.col("raw_judgment"))
                .otherwise(pl.col("raw_judgment"))
            )
            victim = frame.row(0, named=True)
        planted_files.append(tmp_path / f"judgments_{i}.parquet")
        frame.write_parquet(planted_files[-1])
    out = tmp_path / "planted" / "index.html"
    write_browser(
        out,
        questions=workdir / "results/cwpor/questions.parquet",
        responses=sorted((workdir / "results/cwpor").glob("*/responses_v*.parquet")),
        judgments=planted_files,
        eraudit=smoke_audit_files(workdir),
    )
    page = Page(browser, out)
    page.select("#f-model", victim["model"])
    page.select("#f-verbosity", str(victim["verbosity"]))
    card = page.page.locator(f"[data-testid=debate][data-question-id='{victim['question_id']}']")
    assert card.count() == 1
    card.locator("summary").click()
    reply = card.locator("[data-testid=judge-reply]").inner_text()
    assert reply.startswith(PLANTED)
    assert page.page.evaluate("window.__pwned") is None
    assert page.count("script") == 2 and page.count("img") == 0
    page.screenshot(tmp_path / "smoke_planted_script.png")
    assert not page.errors, page.errors
    page.close()
