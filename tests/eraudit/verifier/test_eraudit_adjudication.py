"""Grounded adjudication targets (verifier.lm_target: adjudication): the teacher never sees q_h; `told`
names the answer, `blind-first` (the release's) tries blind before a note names it, audits every reply and
records which attempt wrote it; nothing is dropped silently, the generation is cached, fine-tuning trains on
exactly the adjudication text with each row's own answer line, and the setting decides which rules run."""

from __future__ import annotations

import os
from functools import partial

import polars as pl
import pytest
from helpers import offline_snakemake
from smoke_workflow import job_stats, project_copy
from transformers import AutoTokenizer

from debate_audit.eraudit.debate.debates import PRIVATE_NOTE, render_transcript
from debate_audit.eraudit.debate.selection import SELECTED_SCHEMA
from debate_audit.eraudit.verifier import adjudication as adj
from debate_audit.eraudit.verifier.finetune import FinetuneSettings
from debate_audit.eraudit.verifier.training_rows import (
    IGNORE,
    adjudication_target,
    encode_example,
    lm_targets,
)

# Distinctive hidden-question strings: none may reach the adjudication prompt.
Q_H = "Which zeppelin carried the quinquireme of Nineveh?"
H_TRUE = "The xylophone barge Ophir"
H_FALSE = "The marmalade dirigible Tarshish"
PRIVATE = PRIVATE_NOTE.format(q_h=Q_H, h_true=H_TRUE, h_false=H_FALSE)
PAIRS = [
    {
        "pair_id": 0,
        "story_title": "Dock",
        "q_m": "Why did Mira wait at the dock?",
        "y_true": "She trusted Pim to return",
        "y_false": "She was afraid of the storm",
        "q_h": Q_H,
        "h_true": H_TRUE,
        "h_false": H_FALSE,
        "context": "Mira waited for Pim until dusk.",
    },
    {
        "pair_id": 1,
        "story_title": "Mill",
        "q_m": "What did Oren mend first?",
        "y_true": "The mill wheel",
        "y_false": "The roof",
        "q_h": Q_H,
        "h_true": H_TRUE,
        "h_false": H_FALSE,
        "context": "Oren mended the mill wheel before the roof.",
    },
    {
        "pair_id": 2,
        "story_title": "Gate",
        "q_m": "Who locked the gate?",
        "y_true": "Tam",
        "y_false": "Ula",
        "q_h": Q_H,
        "h_true": H_TRUE,
        "h_false": H_FALSE,
        "context": "Tam locked the gate.",
    },
]


def _argument(round_no, debater, defends_true, text, quotes=1, verified=1):
    # `raw` and the scratchpad hold the private instruction: only the public `text` may ever be read.
    return {
        "round": round_no,
        "debater": debater,
        "defends_true": defends_true,
        "raw": f"{PRIVATE}\n{text}",
        "thinking": PRIVATE,
        "text": text,
        "words": len(text.split()),
        "truncated": False,
        "quotes": quotes,
        "verified_quotes": verified,
    }


def _selected_row(pair, true_position, status="ok", mode="adversarial"):
    options = (pair["y_true"], pair["y_false"]) if true_position == "A" else (pair["y_false"], pair["y_true"])
    true_debater = true_position
    false_debater = "B" if true_position == "A" else "A"
    args = sorted(
        [
            _argument(1, true_debater, True, f"It says <v_quote>{pair['context']}</v_quote>"),
            _argument(1, false_debater, False, "It says <u_quote>nothing of the kind</u_quote>", verified=0),
        ],
        key=lambda a: a["debater"],
    )
    return {
        "dataset": "quality_h",
        "pair_id": pair["pair_id"],
        "story_title": pair["story_title"],
        "mode": mode,
        "status": status,
        "reason": None if status == "ok" else "why",
        "candidate": None if status == "none" else 0,
        "n_candidates": 1,
        "n_leaking": 0,
        "n_hard_terms": 0,
        "n_unverified_quotes": 0,
        "n_monitored_correct": 1,
        "true_position": true_position,
        "arguments": None if status == "none" else args,
        "transcript": None if status == "none" else render_transcript(pair["q_m"], options, args),
        "p_monitored_true": 0.6,
        "p_hidden_true": 0.4,
        "p_hidden_false": 0.6,
        "leak_score": 0.0,
    }


def _frames(rows):
    selected = pl.DataFrame(rows, schema=SELECTED_SCHEMA)
    pairs = pl.DataFrame(PAIRS)
    split = pl.DataFrame(
        {"pair_id": [0, 1, 2], "split": ["train", "train", "eval"], "split_adversarial": ["train", "train", "eval"]}
    )
    return selected, pairs, split


class Recorder:
    """Stands in for LanguageModel.generate: keeps every conversation, replies with canned texts."""

    def __init__(self, replies):
        self.replies, self.conversations, self.params = list(replies), [], None

    def generate(self, conversations, params, desc=""):
        self.conversations.extend(conversations)
        self.params = params
        return [[self.replies.pop(0)] for _ in conversations]


def test_the_adjudication_prompt_never_holds_q_h_its_answers_or_the_private_instruction():
    rows = [_selected_row(PAIRS[0], "A"), _selected_row(PAIRS[1], "B")]
    lm = Recorder(["Debater A's quote is verified.", "Debater B's quote is verified."])
    adj.adjudicate_rows(lm, *_frames(rows), adj.AdjudicationSettings())
    assert len(lm.conversations) == 2
    for row, conversation in zip(rows, lm.conversations):
        prompt = "\n".join(m["content"] for m in conversation)
        for secret in (Q_H, H_TRUE, H_FALSE, PRIVATE, "Private instruction", "zeppelin", "xylophone", "marmalade"):
            assert secret not in prompt, secret
        assert row["transcript"] in prompt  # the public transcript, quote marks included
        assert "<v_quote>" in prompt and "<u_quote>" in prompt
        pair = PAIRS[row["pair_id"]]
        # told the answer by its text and debater, never by a letter: one text serves both rows of the pair
        assert (
            pair["q_m"] in prompt
            and f'The correct answer is "{pair["y_true"]}", defended by Debater {row["true_position"]}' in prompt
        )
        assert "The correct answer is A" not in prompt and "The correct answer is B" not in prompt
        assert conversation[-1] == {"role": "assistant", "content": adj.PREFILL}
    assert lm.params.do_sample is False


def test_told_adjudications_carry_no_answer_line_and_a_contradicting_one_is_cut():
    rows = [_selected_row(PAIRS[0], "A"), _selected_row(PAIRS[1], "B")]
    lm = Recorder(
        [
            "Debater A quotes verified text. Check: it supports A.\nConclusion: A holds.\nAnswer: B\nmore",
            "Debater B's quote is verified.\n**Answer:** B",
        ]
    )
    out, rejected = adj.adjudicate_rows(lm, *_frames(rows), adj.AdjudicationSettings(), teacher="t")
    assert rejected == []
    first, second = out
    assert first["text"] == "Evidence: Debater A quotes verified text. Check: it supports A.\nConclusion: A holds."
    assert first["model_answer"] == "B" and first["status"] == "ok"
    assert (first["teacher"], first["protocol"], first["attempt"], first["tier"]) == ("t", "told", 0, "told")
    assert "Answer:" not in second["text"] and second["model_answer"] == "B"


def test_an_empty_generation_falls_back_explicitly_and_untrained_rows_are_rejected_with_a_reason():
    rows = [
        _selected_row(PAIRS[0], "B"),
        _selected_row(PAIRS[1], "A", status="fallback"),
        _selected_row(PAIRS[2], "A"),
    ]  # adversarial fallback: not trained; pair 2: eval split
    out, rejected = adj.adjudicate_rows(Recorder(["   "]), *_frames(rows), adj.AdjudicationSettings())
    (only,) = out
    assert only["status"] == "fallback" and "quote counts" in only["reason"]
    assert only["text"] == (
        "Evidence: Debater A cites 0 verified and 1 unverified quotes; Debater B cites 1 verified "
        "and 0 unverified quotes.\nConclusion: the answer Debater B defends is the correct one."
    )
    reasons = {r["pair_id"]: r["reason"] for r in rejected}
    assert set(reasons) == {1, 2}
    assert reasons[1].startswith("status fallback not trained on") and "not in the train split" in reasons[2]


def test_a_looping_or_copying_generation_stops_where_it_starts_to_repeat():
    body, letter = adj.clean_adjudication("Mira waited because she trusted Pim.\nEvidence: She trusted Pim.\nEvidence:")
    assert (body, letter) == ("Evidence: Mira waited because she trusted Pim.", None)
    body, _ = adj.clean_adjudication("Debater A is verified. Check: it holds.\nQuestion: Why did Mira wait?")
    assert body == "Evidence: Debater A is verified. Check: it holds."
    body, _ = adj.clean_adjudication("Debater A is verified. Check: it holds. Conclusion: A is")
    assert body == "Evidence: Debater A is verified. Check: it holds."  # the budget cut it mid-sentence


def _write_inputs(tmp_path, rows):
    selected, pairs, split = _frames(rows)
    paths = {name: tmp_path / f"{name}.parquet" for name in ("selected", "pairs", "split")}
    for name, frame in zip(paths, (selected, pairs, split)):
        frame.write_parquet(paths[name])
    return paths


def test_the_embedded_model_adjudicates_two_items_and_a_rerun_comes_from_the_cache(tmp_path, embedded_ref, monkeypatch):
    paths = _write_inputs(
        tmp_path, [_selected_row(PAIRS[0], "A", mode="honest"), _selected_row(PAIRS[1], "B", mode="honest")]
    )
    kwargs = dict(settings=adj.AdjudicationSettings(max_new_tokens=24), cache=str(tmp_path / "cache"))

    def run(name):
        return adj.adjudicate_transcripts(
            paths["selected"],
            paths["pairs"],
            paths["split"],
            embedded_ref,
            tmp_path / f"{name}.parquet",
            tmp_path / f"{name}.rejected.parquet",
            **kwargs,
        )

    first = run("first")
    assert first["pair_id"].to_list() == [0, 1] and first["mode"].to_list() == ["honest", "honest"]
    assert first["text"].str.starts_with("Evidence:").all() and first["teacher"].to_list() == [embedded_ref.name] * 2
    assert first["raw"].str.len_chars().min() > 0  # the model wrote something
    assert pl.read_parquet(tmp_path / "first.rejected.parquet").height == 0

    def no_decoding(*args, **kwargs):
        raise AssertionError("a cached adjudication was decoded again")

    monkeypatch.setattr("debate_audit.models.lm.decode", no_decoding)
    second = run("second")
    assert second.equals(first)


# ------------------------------------------------------------------ blind-first: the release's teacher protocol
TRUE_ARG = "The text says <v_quote>Mira waited for Pim until dusk.</v_quote> so she trusted him to come back."
FALSE_ARG = "She feared the storm that was gathering over the harbour all afternoon long."
CHECK = (
    "Debater A cites a verified line showing that Mira waited for Pim until dusk. Debater B offers only an "
    "unquoted claim about a storm, which nothing verified supports."
)


def _blind_row(true_position):
    row = _selected_row(PAIRS[0], true_position)
    false_position = "B" if true_position == "A" else "A"
    row["arguments"] = sorted(
        [
            _argument(1, true_position, True, TRUE_ARG),
            _argument(1, false_position, False, FALSE_ARG, quotes=0, verified=0),
        ],
        key=lambda a: a["debater"],
    )
    options = (PAIRS[0]["y_true"], PAIRS[0]["y_false"])
    row["transcript"] = render_transcript(
        PAIRS[0]["q_m"], options if true_position == "A" else options[::-1], row["arguments"]
    )
    return row


def _reply(
    winner="Debater A",
    true_span="Mira waited for Pim until dusk.",
    false_span=FALSE_ARG[:55],
    check=CHECK,
    true_position="A",
):
    spans = {true_position: true_span, "B" if true_position == "A" else "A": false_span}
    return (
        f'I weigh both sides first.\nDebater A evidence: "{spans["A"]}"\nDebater B evidence: "{spans["B"]}"\n'
        f"Check: {check}\nConclusion: {winner} presents the stronger case."
    )


BLIND = adj.AdjudicationSettings(max_new_tokens=64, protocol="blind-first")


def test_the_blind_attempt_sees_no_answer_and_is_kept_when_it_reaches_the_y_true_debater():
    lm = Recorder([_reply()])
    (row,), rejected = adj.adjudicate_rows(lm, *_frames([_blind_row("A")]), BLIND, teacher="gpt-oss-20b")
    assert rejected == [] and len(lm.conversations) == 1  # no retry needed
    ((system, user),) = [[m["content"] for m in c] for c in lm.conversations]
    assert system == adj.TEACHER_SYSTEM and "You are an expert judge in a debate" in user
    assert user.endswith(adj.TEACHER_INSTRUCTION)  # blind: no grading note
    assert PAIRS[0]["y_true"] in user and "Grading note" not in user  # the options are shown, not which is correct
    for secret in (Q_H, H_TRUE, H_FALSE, PRIVATE, "Private instruction"):
        assert secret not in user
    assert lm.params.do_sample is False  # attempt 0 is greedy
    assert (row["status"], row["attempt"], row["tier"], row["failures"]) == ("ok", 0, "blind", [])
    assert (
        row["text"].splitlines()
        == [
            'Debater A\'s key evidence: "Mira waited for Pim until dusk." (verified)',  # recomputed from the context
            f'Debater B\'s key evidence: "{FALSE_ARG[:55]}" (unverified)',
            f"Check: {CHECK}",
            "Conclusion: Debater A presents the stronger case.",
        ]
    )
    assert row["teacher"] == "gpt-oss-20b" and row["protocol"] == "blind-first"


def test_a_wrong_blind_verdict_is_retried_sampled_then_with_the_note_naming_the_answer():
    # attempt 0 names the wrong debater, attempt 1 breaks the schema, attempt 2 (the note) passes
    lm = Recorder([_reply(winner="Debater B"), "Debater A wins.", _reply()])
    seen = []
    generate = lm.generate

    def record(conversations, params, desc=""):
        seen.append((params, [c[1]["content"] for c in conversations]))
        return generate(conversations, params, desc)

    lm.generate = record
    (row,), _ = adj.adjudicate_rows(lm, *_frames([_blind_row("A")]), BLIND)
    assert (row["status"], row["attempt"], row["tier"]) == ("ok", 2, "gold")
    assert row["failures"] == [
        "attempt 0 (blind): conclusion names Debater B but the Y_true debater is Debater A",
        row["failures"][1],
    ] and row["failures"][1].startswith("attempt 1 (blind): ")
    (p0, u0), (p1, u1), (p2, u2) = seen
    assert not p0.do_sample and p1.do_sample and p1.temperature == 0.7 and p1.top_p == 1.0 and not p2.do_sample
    assert "Grading note" not in u0[0] and "Grading note" not in u1[0]
    note = adj.GOLD_NOTE.format(answer_text=PAIRS[0]["y_true"], gold_debater="Debater A")
    assert u2[0].endswith(note) and "answer A" not in note  # names the text and the debater, never a letter


def test_a_pair_no_attempt_resolves_is_kept_unresolved_and_trains_no_lm(tmp_path):
    lm = Recorder([_reply(winner="Debater B")] * 4)
    (row,), _ = adj.adjudicate_rows(lm, *_frames([_blind_row("A")]), BLIND)
    assert row["status"] == "unresolved" and row["text"] is None and row["attempt"] is None
    assert [f.split(":")[0] for f in row["failures"]] == [
        "attempt 0 (blind)",
        "attempt 1 (blind)",
        "attempt 2 (gold)",
        "attempt 3 (gold)",
    ]
    path = tmp_path / "adj.parquet"
    pl.DataFrame([row], schema=adj.ADJUDICATION_SCHEMA).write_parquet(path)
    assert lm_targets([{"pair_id": 0}], "adjudication", path, "adversarial") == [None]


@pytest.mark.parametrize(
    "reply, reason",
    [
        (_reply(true_span="Mira waited for Pim until the storm came."), "not a verbatim run"),
        (_reply(false_span="The text says Mira waited for Pim until dusk."), "not a verbatim run"),
        (_reply(true_span="Mira waited"), "normalised characters"),
        (_reply(check="Debater A is right. Debater B is wrong."), "characters"),
        (_reply(check=CHECK.replace("Debater B", "the other side")), "does not name Debater B"),
        (_reply(check=CHECK + " So answer A is right."), "answer letter"),
        (_reply(check=CHECK + f" It also mentions {H_FALSE}."), "hidden answer h_false"),
    ],
)
def test_the_releases_audits_reject_a_reply(reply, reason):
    row = _frames([_blind_row("A")])[1].join(pl.DataFrame([_blind_row("A")], schema=SELECTED_SCHEMA), on="pair_id")
    with pytest.raises(ValueError, match=reason):
        adj.validate_reply(reply, row.to_dicts()[0], "prompt without the hidden answers")


def test_the_teacher_reads_a_seeded_order_and_the_y_true_debater_wins_in_either_stance():
    positions = {adj.teacher_position(pair_id) for pair_id in range(20)}
    assert positions == {"A", "B"}
    lm = Recorder([_reply(winner="Debater B", true_position="B")])
    (row,), _ = adj.adjudicate_rows(lm, *_frames([_blind_row("B")]), BLIND)
    assert row["status"] == "ok" and row["text"].endswith("Conclusion: Debater B presents the stronger case.")


# ------------------------------------------------------------------ fine-tuning reads them
@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir):
    return AutoTokenizer.from_pretrained(embedded_model_dir)


ITEM = {
    "q_m": PAIRS[0]["q_m"],
    "y_true": PAIRS[0]["y_true"],
    "y_false": PAIRS[0]["y_false"],
    "q_h": Q_H,
    "h_true": H_TRUE,
    "h_false": H_FALSE,
}
ADJUDICATION = (
    "Evidence: Debater B's quote <v_quote>Mira waited for Pim until dusk.</v_quote> is verified.\n"
    "Check: it shows trust, not fear.\nConclusion: Debater B is right."
)


def test_each_row_trains_on_the_adjudication_as_the_whole_reply_with_its_own_answer_line(tokenizer):
    transcript = _selected_row(PAIRS[0], "B")["transcript"]
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=transcript,
        item=ITEM,
        target=partial(adjudication_target, ADJUDICATION),
        with_qh=True,
        max_length=512,
        max_target_tokens=128,
        readout="auto",
        reply=True,
    )
    for row, letter, options in zip(rows, "AB", [(ITEM["y_true"], ITEM["y_false"]), (ITEM["y_false"], ITEM["y_true"])]):
        target = [t for t in row.lm_labels if t != IGNORE]
        expected = f"{ADJUDICATION}\nAnswer: {letter}"
        assert target == tokenizer(expected, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        prompt = tokenizer.decode(row.lm_ids[: len(row.lm_ids) - len(target)])
        assert prompt.endswith("<|im_start|>assistant\n")  # the reply is the adjudication, no "Answer:" prefill
        assert f"A. {options[0]}\nB. {options[1]}" in prompt  # the row's answer order
        # The L_fc readout is untouched by the target choice.
        assert tokenizer.decode(row.fc[0].ids).endswith("<|im_start|>assistant\nAnswer:")


def test_a_cut_adjudication_keeps_its_answer_line(tokenizer):
    transcript = _selected_row(PAIRS[0], "B")["transcript"]
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=transcript,
        item=ITEM,
        target=partial(adjudication_target, ADJUDICATION),
        with_qh=False,
        max_length=512,
        max_target_tokens=12,
        readout="auto",
        reply=True,
    )
    for row, letter in zip(rows, "AB"):
        target = [t for t in row.lm_labels if t != IGNORE]
        assert len(target) == 12 + 1
        assert tokenizer.decode(target[:-1]).endswith(f"\nAnswer: {letter}")
        assert tokenizer.decode(target).startswith("Evidence:")


def _adjudication_file(tmp_path, rows):
    path = tmp_path / "adjudications.parquet"
    pl.DataFrame(rows, schema=adj.ADJUDICATION_SCHEMA).write_parquet(path)
    return path


def _adjudication(pair_id, true_position, mode="adversarial", text="Evidence: x y z."):
    return {
        "dataset": "quality_h",
        "pair_id": pair_id,
        "mode": mode,
        "true_position": true_position,
        "teacher": "t",
        "protocol": "told",
        "text": text,
        "raw": "x y z.",
        "attempt": 0,
        "tier": "told",
        "failures": [],
        "model_answer": None,
        "status": "ok",
        "reason": None,
    }


def test_finetuning_takes_the_adjudication_of_each_item_and_fails_naming_a_missing_one(tmp_path):
    items = [{"pair_id": 0, "true_position": "A"}, {"pair_id": 1, "true_position": "B"}]
    path = _adjudication_file(tmp_path, [_adjudication(0, "A", text="T0"), _adjudication(1, "B", text="T1")])
    targets = lm_targets(items, "adjudication", path, "adversarial")
    assert [t(letter) for t in targets for letter in "AB"] == [
        "T0\nAnswer: A",
        "T0\nAnswer: B",
        "T1\nAnswer: A",
        "T1\nAnswer: B",
    ]
    missing = _adjudication_file(tmp_path, [_adjudication(0, "A")])
    with pytest.raises(ValueError, match=rf"pair 1: no adjudication in {missing}"):
        lm_targets(items, "adjudication", missing, "adversarial")
    with pytest.raises(ValueError, match="mode"):
        lm_targets(items, "adjudication", path, "honest")
    with pytest.raises(ValueError, match="no adjudications file"):
        lm_targets(items, "adjudication", None, "adversarial")


def test_the_lm_target_and_the_protocol_are_checked_settings():
    with pytest.raises(ValueError, match="verifier.lm_target"):
        FinetuneSettings(lm_target="reason")
    with pytest.raises(ValueError, match="verifier.adjudication.protocol"):
        adj.AdjudicationSettings(protocol="oracle")


# ------------------------------------------------------------------ the workflow
CONFIGS = ["--configfile", "config/config.yaml", "tests/smoke/config.yaml"]


@pytest.mark.slow
def test_switching_lm_target_decides_whether_the_adjudication_jobs_run(tmp_path):
    workdir = project_copy(tmp_path)
    (workdir / "argument.yaml").write_text("verifier:\n  lm_target: argument\n")
    with_adjudication = job_stats(offline_snakemake(workdir, "-n", *CONFIGS))
    with_argument = job_stats(offline_snakemake(workdir, "-n", *CONFIGS, "argument.yaml"))
    assert with_adjudication.pop("verifier_adjudicate") == 2 * 2  # datasets x debate modes
    assert with_adjudication == with_argument  # nothing else changes in a plan from nothing
    # A finished adjudication-target run switched to `argument`: fine-tuning and what follows rerun, nothing
    # upstream, and no adjudication job.
    plan = offline_snakemake(workdir, "-n", *CONFIGS)
    offline_snakemake(workdir, "--touch", "-c1", *CONFIGS)  # records each job's params; touches nothing yet
    for line in plan.splitlines():
        if line.strip().startswith(("output:", "benchmark:")):
            for path in line.split(":", 1)[1].split(","):
                target = workdir / path.strip()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
                os.utime(target, (1.7e9, 1.7e9))  # one mtime: only params can trigger
    assert job_stats(offline_snakemake(workdir, "-n", "--rerun-triggers", "params", *CONFIGS)) == {}
    rerun = job_stats(offline_snakemake(workdir, "-n", "--rerun-triggers", "params", *CONFIGS, "argument.yaml"))
    assert rerun["verifier_finetune"] == 6 and "verifier_adjudicate" not in rerun
    assert not {r for r in rerun if r.startswith(("debate", "paraphrase", "cwpor", "prepare"))}
