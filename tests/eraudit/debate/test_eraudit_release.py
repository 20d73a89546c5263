"""Importing the ER-Audit release's transcripts as selected transcripts."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

from debate_audit.data.pairs import prepare_gpqa_h
from debate_audit.eraudit.debate.release import import_release, parse_turns, row_hash
from debate_audit.eraudit.debate.selection import SELECTED_SCHEMA

RELEASE_FILES = {
    "GPQA-verifier-fullft-train.jsonl.gz": ("honest", 160, 80),
    "GPQA-verifier-fullft-eval.jsonl.gz": ("honest", 42, 21),
    "GPQA-verifier-fullft-adversarial-train.jsonl.gz": ("adversarial", 132, 66),
    "GPQA-verifier-fullft-adversarial-eval.jsonl.gz": ("adversarial", 34, 17),
}
REPAIRED = ("gpqa_02add1f3f2a8ae89",)  # the release README's one expected hash mismatch


def judge_prompt(turns: list[tuple[str, str]]) -> str:
    body = "\n\n".join(f'Round {i // 2 + 1}:\n\nDebater {d}: """{t}"""' for i, (d, t) in enumerate(turns))
    return f'Question: q?\nA: x\nB: y\n\n<transcript>\n\n{body}\n\n</transcript>\n\nAnswer as "Answer: <A|B>".'


def test_turns_alternate_and_count_quotes():
    args = parse_turns(
        judge_prompt(
            [
                ("A", "It says <v_quote>yes</v_quote> and <u_quote>no</u_quote>."),
                ("B", "Wrong. <TRUNCATED>"),
            ]
        )
    )
    assert [(a["round"], a["debater"]) for a in args] == [(1, "A"), (1, "B")]
    assert (args[0]["quotes"], args[0]["verified_quotes"], args[0]["truncated"]) == (2, 1, False)
    assert args[0]["words"] == 5 and args[1]["truncated"] is True


@pytest.mark.parametrize(
    "turns, message",
    [
        ([("A", "x")], "expected A/B pairs"),
        ([("B", "x"), ("A", "y")], "alternate"),
    ],
)
def test_malformed_transcripts_are_errors(turns, message):
    with pytest.raises(ValueError, match=message):
        parse_turns(judge_prompt(turns))


def test_row_without_a_pair_or_with_a_bad_hash_is_rejected(tmp_path):
    pairs = pl.DataFrame({"pair_id": [0], "story_title": ["s0"], "q_m": ["q?"], "y_true": ["x"], "y_false": ["y"]})
    pairs.write_parquet(tmp_path / "pairs.parquet")
    good = {
        "story_title": "s0",
        "dataset_index": 0,
        "debater_stances": {"Debater A": "Y_false"},
        "messages": [{"role": "user", "content": judge_prompt([("A", "a"), ("B", "b")])}],
        "target": "Answer: B",
    }
    good["row_sha256"] = row_hash(good)
    rows = [good, {**good, "story_title": "elsewhere"}, {**good, "row_sha256": "0" * 64}, {**good, "dataset_index": 5}]
    with (tmp_path / "rows.jsonl").open("w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    out = import_release(
        tmp_path / "rows.jsonl",
        tmp_path / "pairs.parquet",
        tmp_path / "sel.parquet",
        tmp_path / "rej.parquet",
        dataset="d",
        mode="honest",
    )
    assert out.height == 1 and out["true_position"].to_list() == ["B"]
    assert out["transcript"][0].startswith("Question: q?\nDebater A defends: y\nDebater B defends: x")
    reasons = pl.read_parquet(tmp_path / "rej.parquet")["reason"].to_list()
    assert len(reasons) == 3
    assert any("not a pair" in r for r in reasons) and any("row_sha256" in r for r in reasons)
    assert any("index 5" in r for r in reasons)


@pytest.mark.shared_data
@pytest.mark.parametrize("name", RELEASE_FILES)
def test_release_gpqa_rows_import_with_every_row_accounted_for(tmp_path, shared_data, name):
    mode, n_rows, n_pairs = RELEASE_FILES[name]
    prepare_gpqa_h(
        str(shared_data / "gpqa_h/GPQA-H-pairs.json.gz"),
        str(shared_data / "gpqa_h/GPQA-H-title-story.json.gz"),
        tmp_path / "gpqa_h.parquet",
        tmp_path / "gpqa_h.rejected.parquet",
    )
    location = shared_data / "er_audit_release" / name
    with gzip.open(location, "rt") as fh:
        assert sum(1 for _ in fh) == n_rows
    out = import_release(
        location,
        tmp_path / "gpqa_h.parquet",
        tmp_path / "sel.parquet",
        tmp_path / "rej.parquet",
        dataset="gpqa_h",
        mode=mode,
        expected_hash_mismatch=REPAIRED,
    )
    rejected = pl.read_parquet(tmp_path / "rej.parquet")
    # Two rows (answer orders) per pair, one transcript: every row is in a kept pair or rejected.
    assert out.height == n_pairs and rejected.height == 0
    assert out.schema == pl.Schema(SELECTED_SCHEMA)
    assert set(out["status"]) == {"ok"} and set(out["mode"]) == {mode}
    assert out["arguments"].list.len().to_list() == [6] * n_pairs  # 3 rounds x 2 debaters


@pytest.mark.slow
@pytest.mark.shared_data
def test_release_transcripts_train_the_verifiers_in_a_smoke_run(tmp_path, shared_data, embedded_model_dir):
    """The overlay chain imports the GPQA-H transcripts and fine-tunes V_honest and V_org on them."""
    import subprocess
    import sys
    from pathlib import Path

    from smoke_workflow import scratch_copy

    workdir = scratch_copy(tmp_path / "project", embedded_model_dir, copy_model=True)
    (tmp_path / "shared").symlink_to(shared_data.parent)
    # The import is under test; adjudicating the release's ~2,000-token transcripts with the embedded model
    # takes a quarter of an hour on 2 cores (tests/eraudit/verifier/test_eraudit_adjudication.py covers the targets).
    (workdir / "argument.yaml").write_text("verifier: {lm_target: argument}\n")
    overlays = [
        "config/config.yaml",
        "tests/smoke/config.yaml",
        "config/shared-data.yaml",
        "config/release-split.yaml",
        "config/release-transcripts.yaml",
        "argument.yaml",
    ]
    # V_adv trains exactly as V_honest does (other transcripts): honest and org cover both objectives.
    targets = [f"resources/verifiers/smollm2-135m/gpqa_h/release/{v}/fingerprint.json" for v in ("honest", "org_qh10")]
    cmd = [
        str(Path(sys.executable).parent / "snakemake"),
        "--cores",
        "2",
        "--resources",
        "gpu=2",
        "--configfile",
        *overlays,
        "--",
        *targets,
    ]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-6000:]
    honest = pl.read_parquet(workdir / "results/er_audit/debate/gpqa_h/release/debates_honest.parquet")
    adversarial = pl.read_parquet(workdir / "results/er_audit/debate/gpqa_h/release/debates_adversarial.parquet")
    assert (honest.height, adversarial.height) == (80 + 21, 66 + 17)
    for mode in ("honest", "adversarial"):
        assert (
            pl.read_parquet(workdir / f"results/er_audit/debate/gpqa_h/release/debates_{mode}.rejected.parquet").height
            == 0
        )
    curve = pl.read_parquet(
        workdir / "results/er_audit/verifier/smollm2-135m/gpqa_h/release/org_qh10/loss_curve.parquet"
    )
    assert curve.height > 0  # V_org took optimizer steps on imported adversarial transcripts
