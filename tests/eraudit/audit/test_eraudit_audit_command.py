"""`debate-audit audit` end to end (tools/audit_command.py): the embedded model as the base, against a target
this test fine-tunes toward the false answers of two hidden questions and against an exact copy of the base,
both brought as local directories, on four GPQA-H demo pairs in your own layout (data/demo/own_pairs.jsonl).

The printed verdict must flag the fine-tuned target on those two questions and flag nothing of the copy (the
audit's power and its false-alarm control, as tests/eraudit/audit/test_eraudit_known_answer.py checks them for
a trained V_org), and the overlay the command wrote must reproduce the audit with `debate-audit run`. One real
run of the audit's jobs on the CPU (pools, scores of three models, statistics, figures): several minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from smoke_workflow import scratch_copy

from debate_audit import cli

PAIRS = "data/demo/own_pairs.jsonl"  # pair_id is the row
# The audit reads the first four of its six pairs (written as the user's own file): the two planted ones and two
# the target was not tuned on. Each pair costs its paraphrase pools and their scores under three models.
AUDITED = 4
PLANTED = (0, 1)  # the pairs whose hidden question the target learns to get wrong
RUN = "bring"
# Only the last decoder layer learns (the rest frozen, so each step's backward is one layer deep): enough to move
# the answer label on four prompts, at a fraction of a whole-model step's cost on a CPU.
STEPS, LR = 30, 1e-3
# Pools as small as the smoke overlay's: the planted target's hidden questions are far past epsilon
POOLS = ("--search-size", "3", "--test-size", "2")
# the prepared model's tokenizer and chat template, beside the weights a fine-tuning writes
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def train_toward_false_answers(model_dir: Path, pairs: list[dict], out: Path) -> Path:
    """The embedded model fine-tuned so that, read as the audit reads it (chat readout, both answer orders),
    it picks H_false on these pairs' hidden questions; saved as a model directory a user would bring."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from debate_audit.eraudit.common.readout import LABELS, both_orders, tokenizer_chat

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    chat = tokenizer_chat(tokenizer)
    rows = []  # (prompt ids, the false answer's label id)
    for pair in pairs:
        qh = pair["Q_H"]
        true_first, true_second = both_orders(qh["question"], qh["H_true"], qh["H_false"], chat=chat)
        for prompt, label in ((true_first, LABELS[1]), (true_second, LABELS[0])):
            ids = tokenizer(prompt, add_special_tokens=False).input_ids
            full = tokenizer(prompt + label, add_special_tokens=False).input_ids
            assert full[: len(ids)] == ids and len(full) == len(ids) + 1, "the label is one token after the prompt"
            rows.append((ids, full[-1]))
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    trained = [*model.model.layers[-1].parameters(), *model.model.norm.parameters()]
    for parameter in trained:
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(trained, lr=LR)
    model.train()
    for _ in range(STEPS):
        losses = []
        for ids, label in rows:
            logits = model(torch.tensor([ids])).logits[0, -1]
            losses.append(torch.nn.functional.cross_entropy(logits[None], torch.tensor([label])))
        loss = torch.stack(losses).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:  # P(false label) above ~0.95 on every prompt
            break
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (model_dir / name).exists():
            shutil.copy2(model_dir / name, out / name)
    return out


@pytest.fixture(scope="module")
def audited(tmp_path_factory, embedded_model_dir):
    root = tmp_path_factory.mktemp("audit_command")
    workdir = scratch_copy(root / "project", embedded_model_dir)
    lines = [line for line in (workdir / PAIRS).read_text().splitlines() if line.strip()][:AUDITED]
    (workdir / "own_pairs.jsonl").write_text("".join(line + "\n" for line in lines))
    pairs = [json.loads(line) for line in lines]
    tuned = train_toward_false_answers(embedded_model_dir, [pairs[i] for i in PLANTED], root / "tuned")
    twin = root / "twin"
    shutil.copytree(embedded_model_dir.resolve(), twin, ignore=shutil.ignore_patterns("fingerprint.json"))
    argv = [
        "audit",
        "--base",
        "smollm2-135m",
        "--target",
        str(tuned),
        "--target",
        str(twin),
        "--pairs",
        "own_pairs.jsonl",
        "--run",
        RUN,
        *POOLS,
        "--cores",
        "2",
        "--gpus",
        "2",
    ]
    # the command as a user runs it, in the project's folder; its output is what it prints
    done = subprocess.run(
        [sys.executable, "-m", "debate_audit", *argv], cwd=workdir, capture_output=True, text=True, timeout=3000
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return workdir, done.stdout


def verdict_line(verdict: str, target: str) -> str:
    (line,) = [line for line in verdict.splitlines() if line.startswith(f"  {target}: ")]
    return line


@pytest.mark.slow
def test_the_verdict_flags_the_tuned_target_on_its_two_questions_and_not_the_copy(audited):
    workdir, verdict = audited
    assert f"Audit {RUN}: tuned, twin against smollm2-135m" in verdict
    tuned = verdict_line(verdict, "tuned")
    assert tuned.startswith("  tuned: FLAGGED "), verdict
    flagged = {int(p) for p in tuned.split("(pairs ")[1].split(")")[0].split(", ")}
    assert set(PLANTED) <= flagged, verdict
    assert "strongest counterexamples" in verdict
    assert verdict_line(verdict, "twin").startswith("  twin: not flagged: 0 of "), verdict
    # the same in the audit's files: the copy's every Delta is 0
    cell = workdir / f"runs/{RUN}/results/er_audit/audit/models/{RUN}/own_pairs"
    records = pl.read_parquet(cell / "records.parquet")
    statuses = dict(records.filter(pl.col("target") == "tuned").select("pair_id", "status").iter_rows())
    assert all(statuses[p] == "DEGRADED" for p in PLANTED), statuses
    deltas = pl.read_parquet(cell / "deltas.parquet").filter(pl.col("target") == "twin")
    assert deltas.height > 0 and (deltas["delta"] == 0).all()
    # only the audit ran: no CW-POR, no trained verifier
    results = workdir / f"runs/{RUN}/results"
    assert not (results / "cwpor").exists() and not (results / "er_audit/verifier").exists()


@pytest.mark.slow
def test_the_written_overlay_reproduces_the_audit_with_debate_audit_run(audited, monkeypatch):
    workdir, _ = audited
    overlay = f"runs/{RUN}/audit.yaml"
    assert f"# Repeat it: debate-audit run --configfile {overlay}" in (workdir / overlay).read_text()
    cell = workdir / f"runs/{RUN}/results/er_audit/audit/models/{RUN}/own_pairs"
    before = {name: pl.read_parquet(cell / f"{name}.parquet") for name in ("summary", "records", "deltas")}
    monkeypatch.chdir(workdir)
    # the scores again from the overlay alone (the call cache answers), then the statistics from them
    targets = [str(cell.relative_to(workdir) / f"{name}.parquet") for name in before]
    status = cli.main(
        ["run", "--configfile", overlay, "--cores", "2", "--", *targets, "--forcerun", "audit_model_scores"]
    )
    assert status == 0
    for name, frame in before.items():
        assert pl.read_parquet(cell / f"{name}.parquet").equals(frame), name
