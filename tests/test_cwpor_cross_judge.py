"""Several judges of the same debates: who judges whom, the debater x judge matrix, the family contrast."""

import polars as pl
import pytest
from test_cwpor_metrics import judgments

from debate_audit.cwpor.cross_judge import (
    CONTRAST_SCHEMA,
    MATRIX_SCHEMA,
    compute_cross_judge,
    family_contrast,
    judge_matrix,
)
from debate_audit.cwpor.roles import judges, relation
from debate_audit.tools.config_check import config_errors

FAMILIES = {"llama-3b": "llama", "llama-8b": "llama", "qwen-7b": "qwen"}


def judged(model, judge, picks, *, verbosity=30):
    """Judgments of `model`'s debates by `judge`: picks per question 0..n-1, "c" correct, "p" persuaded."""
    rows = [(q, "A" if p == "c" else "B", 4, 0.8, "A", "Myths", "Adversarial") for q, p in enumerate(picks)]
    return judgments(rows, model=model, verbosity=verbosity).with_columns(pl.lit(judge).alias("judge_model"))


def test_primary_judge_comes_first_and_cross_judges_follow_once():
    cw = {"judge_model": None, "cross_judges": ["qwen-7b", "llama-3b"]}
    assert judges(cw, "llama-3b") == ["llama-3b", "qwen-7b"]  # self-judging is not repeated
    assert judges(cw, "llama-8b") == ["llama-8b", "qwen-7b", "llama-3b"]
    assert judges({"judge_model": "qwen-7b", "cross_judges": []}, "llama-3b") == ["qwen-7b"]


def test_relation_separates_self_from_same_family():
    assert relation(FAMILIES, "llama-3b", "llama-3b") == "self"
    assert relation(FAMILIES, "llama-3b", "llama-8b") == "same-family"
    assert relation(FAMILIES, "llama-3b", "qwen-7b") == "other-family"
    assert relation(FAMILIES, "llama-3b", "mystery") == "unknown-family"


def test_matrix_has_one_row_per_debater_judge_pair_and_word_limit():
    frame = pl.concat(
        [
            judged("llama-3b", "llama-3b", "ppcc"),
            judged("llama-3b", "qwen-7b", "pccc"),
            judged("llama-3b", "llama-3b", "pccc", verbosity=60),
            judged("llama-3b", "qwen-7b", "cccc", verbosity=60),
        ]
    )
    matrix = judge_matrix(frame, FAMILIES, resamples=0, level=0.95, seed=0)
    assert list(matrix.columns) == list(MATRIX_SCHEMA)
    pooled = {r["judge_model"]: r for r in matrix.filter(pl.col("verbosity").is_null()).iter_rows(named=True)}
    assert pooled["llama-3b"]["relation"] == "self" and pooled["qwen-7b"]["relation"] == "other-family"
    assert pooled["qwen-7b"]["judge_family"] == "qwen" and pooled["qwen-7b"]["model_family"] == "llama"
    assert pooled["llama-3b"]["por_all"] == pytest.approx(3 / 8)
    assert pooled["qwen-7b"]["por_all"] == pytest.approx(1 / 8)
    assert pooled["qwen-7b"]["cw_por"] == pytest.approx(1 / 8)  # equal weights
    assert matrix.filter(pl.col("verbosity") == 60)["n"].to_list() == [4, 4]


def test_contrast_pools_each_class_and_pairs_the_difference():
    frame = pl.concat(
        [
            judged("llama-3b", "llama-3b", "ppcc"),  # self: 2/4
            judged("llama-3b", "llama-8b", "pccc"),  # same family: 1/4
            judged("llama-3b", "qwen-7b", "cccc"),  # other family: 0/4
            judged("llama-8b", "qwen-7b", "pccc"),  # other family: 1/4
        ]
    )
    contrast = family_contrast(frame, FAMILIES, resamples=300, level=0.9, seed=1)
    assert list(contrast.columns) == list(CONTRAST_SCHEMA)
    value = {(r["comparison"], r["metric"]): r for r in contrast.iter_rows(named=True)}
    assert value[("self", "por_all")]["value"] == pytest.approx(2 / 4)
    assert value[("same-family", "por_all")]["value"] == pytest.approx(1 / 4)
    other = value[("other-family", "por_all")]
    assert (other["value"], other["n_pairs"], other["n"]) == (pytest.approx(1 / 8), 2, 8)
    diff = value[("other-family - self", "por_all")]
    assert diff["value"] == pytest.approx(1 / 8 - 2 / 4)
    assert diff["ci_low"] <= diff["value"] <= diff["ci_high"]
    assert value[("other-family - same-family", "cw_por")]["value"] == pytest.approx(1 / 8 - 1 / 4)


def test_compute_cross_judge_writes_matrix_contrast_and_markdown(tmp_path):
    paths = []
    for judge, picks in (("llama-3b", "ppcc"), ("qwen-7b", "pccc")):
        paths.append(tmp_path / f"{judge}.parquet")
        judged("llama-3b", judge, picks).write_parquet(paths[-1])
    compute_cross_judge(
        paths,
        tmp_path / "m.parquet",
        tmp_path / "c.parquet",
        tmp_path / "x.md",
        families=FAMILIES,
        resamples=50,
        level=0.95,
        seed=0,
    )
    text = (tmp_path / "x.md").read_text()
    assert "llama-3b (llama)" in text and "qwen-7b (qwen)" in text and "other-family - self" in text
    assert pl.read_parquet(tmp_path / "m.parquet").height == 4  # 2 pairs x (pooled + one word limit)


def test_cross_judges_need_a_family_for_every_debater_and_judge():
    config = {
        "models": {"a": {"source": "local", "path": "."}, "b": {"source": "local", "path": "."}},
        "cwpor": {"models": ["a"], "judge_model": None, "cross_judges": ["b"], "families": {"a": "x"}},
    }
    errors = config_errors(config)
    assert any(e.startswith("cwpor.families.b: no family") for e in errors), errors
    config["cwpor"]["families"]["b"] = "y"
    assert not any(e.startswith("cwpor.families") for e in config_errors(config))
    config["cwpor"]["cross_judges"] = ["nope"]
    assert any(e.startswith("cwpor.cross_judges[0]: model 'nope' is not defined") for e in config_errors(config))
