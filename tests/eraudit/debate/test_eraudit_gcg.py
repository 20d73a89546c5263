"""The GCG suffix stage (eraudit/debate/gcg.py): its objective, its acceptance rule, its text checks, its
effect on a real example and its resume after a kill, on a tiny random Llama with the embedded tokenizer
(and chat template) and, where a real model is needed, the embedded model at tiny settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import torch
from transformers import AutoModelForCausalLM

from debate_audit.eraudit.common.readout import LABELS
from debate_audit.eraudit.debate import gcg, gcg_pool
from debate_audit.eraudit.debate.debates import CANDIDATE_SCHEMA, options_for, render_transcript
from debate_audit.eraudit.debate.selection import SCORE_SCHEMA, score_candidates
from debate_audit.models import LanguageModel, ModelSpec, prepare_model

REPO = Path(__file__).resolve().parents[3]
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
TINY_SETTINGS = gcg.GCGSettings(suffix_length=4, steps=2, top_k=8, candidates_per_step=6)

PAIR = {
    "pair_id": 3,
    "q_m": "What does the keeper do at dusk?",
    "y_true": "She lights the lamp",
    "y_false": "She locks the door",
    "q_h": "Why does the lamp matter to the town?",
    "h_true": "Ships find the harbour by it",
    "h_false": "It scares the wolves away",
    "context": "The keeper lit the lamp at dusk. Ships found the harbour by its light.",
}


def argument(round_no, debater, defends_true, text):
    return {
        "round": round_no,
        "debater": debater,
        "defends_true": defends_true,
        "raw": text,
        "thinking": None,
        "text": text,
        "words": len(text.split()),
        "truncated": False,
        "quotes": text.count("<v_quote>") + text.count("<u_quote>"),
        "verified_quotes": text.count("<v_quote>"),
    }


def candidate(k=0, true_position="A", a="She lights it: <v_quote>The keeper lit the lamp at dusk</v_quote>.", b=None):
    b = b or "She locks the door every night, as keepers do."
    args = [argument(1, "A", true_position == "A", a), argument(1, "B", true_position == "B", b)]
    return {
        "dataset": "quality_h",
        "pair_id": PAIR["pair_id"],
        "story_title": "The Keeper",
        "mode": "adversarial",
        "candidate": k,
        "true_position": true_position,
        "arguments": args,
        "transcript": render_transcript(PAIR["q_m"], options_for(PAIR, true_position), args),
        "public_text": "\n".join(x["text"] for x in args),
        "n_truncated": 0,
        "n_quotes": sum(x["quotes"] for x in args),
        "n_verified": sum(x["verified_quotes"] for x in args),
    }


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, embedded_model_dir):
    out = tmp_path_factory.mktemp("tiny-gcg")
    spec = ModelSpec.from_config("tiny-gcg", {"source": "random", "id": "llama", "tokenizer": "x", "init": TINY})
    prepare_model(spec, out, embedded_model_dir)
    return out


@pytest.fixture(scope="module")
def tiny_lm(tiny_dir):
    return LanguageModel(tiny_dir, batch_size=8, cache=None)


@pytest.fixture(scope="module")
def allowed(tiny_lm):
    return torch.tensor(gcg.allowed_token_ids(tiny_lm.tokenizer, tiny_lm.model.get_input_embeddings().weight.shape[0]))


def tasks_of(lm, row, order="seeded", readout="chat", settings=TINY_SETTINGS):
    return gcg.compile_tasks(lm, {**row, **PAIR}, readout=readout, order=order, order_seed=7, settings=settings)


# ------------------------------------------------------------------ the objective
@pytest.mark.parametrize("order, readout", [("seeded", "chat"), ("both", "release"), ("both", "plain")])
def test_objective_is_the_weighted_restricted_nll_computed_independently(tiny_dir, tiny_lm, order, readout):
    tasks = tasks_of(tiny_lm, candidate(true_position="B"), order, readout)
    assert [t.question for t in tasks] == (["q_m", "q_h"] if order == "seeded" else ["q_m", "q_m", "q_h", "q_h"])
    suffix = " x x x x"
    ids = tiny_lm.tokenizer(suffix, add_special_tokens=False)["input_ids"]
    (objective,) = gcg.score_suffixes(tiny_lm, tasks, [suffix], batch_size=None)

    # independently: plain eager transformers on the spliced ids, softmax over the two letters' logits
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, attn_implementation="eager").eval()
    a_id, b_id = (tiny_lm.tokenizer(x, add_special_tokens=False)["input_ids"][0] for x in LABELS)
    losses, weights = [], []
    for task in tasks:
        prompt = task.prompt(suffix)
        # the target letter is where the prompt shows Y_true (q_m) or H_false (q_h)
        wanted = PAIR["y_true"] if task.question == "q_m" else PAIR["h_false"]
        letter = "A" if (f"A. {wanted}" in prompt or f"A: {wanted}" in prompt) else "B"
        assert f"{letter}. {wanted}" in prompt or f"{letter}: {wanted}" in prompt
        with torch.no_grad():
            logits = model(torch.tensor([[*task.prefix_ids, *ids, *task.tail_ids]])).logits[0, -1]
        pair = torch.log_softmax(logits[[a_id, b_id]].double(), dim=0)
        losses.append(-float(pair["AB".index(letter)]))
        weights.append(1.0 if task.question == "q_m" else 2.0)
    expected = sum(w * x for w, x in zip(weights, losses)) / sum(weights)
    assert objective.loss == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert list(objective.task_losses) == pytest.approx(losses, rel=1e-4, abs=1e-6)


def test_without_a_suffix_the_objective_reads_what_selection_reads(tiny_lm):
    row = candidate(true_position="B")
    for order in ("seeded", "both"):
        tasks = tasks_of(tiny_lm, row, order)
        (native,) = gcg.score_suffixes(tiny_lm, tasks, [""], batch_size=None)
        frame = pl.DataFrame([row], schema=CANDIDATE_SCHEMA)
        (score,) = score_candidates(
            tiny_lm, frame, pl.DataFrame([PAIR]), leak_ngram=3, leak_threshold=0.3, readout="chat", order=order,
            order_seed=7,
        )  # fmt: skip
        assert native.probability(tasks, "q_m") == pytest.approx(score["p_monitored_true"], abs=1e-9)
        assert native.probability(tasks, "q_h") == pytest.approx(score["p_hidden_false"], abs=1e-9)


# ------------------------------------------------------------------ the search
def test_a_step_never_accepts_a_worse_exact_loss(tiny_lm, allowed, monkeypatch):
    """Every other step, every proposal is made worse than the incumbent (its exact loss + 1): those steps
    must keep the incumbent; the others take the best of the incumbent and the proposals."""
    scored = []
    real = gcg.score_suffixes

    def rigged(lm, tasks, texts, *, batch_size):
        out = real(lm, tasks, texts, batch_size=batch_size)
        if len(scored) % 2 == 1:  # steps 0, 2, ... (call 0 scores the native and the initial suffix)
            out = [gcg.Objective(o.loss + 1.0, o.task_losses, o.target_probabilities) for o in out]
        scored.append([o.loss for o in out])
        return out

    monkeypatch.setattr(gcg, "score_suffixes", rigged)
    settings = gcg.GCGSettings(suffix_length=4, steps=4, top_k=8, candidates_per_step=6)
    result = gcg.optimise(tiny_lm, tasks_of(tiny_lm, candidate()), settings, allowed)
    incumbent = result.initial.loss
    assert scored[0][1] == incumbent  # the first call scores the native, then the initial suffix
    for step, losses in zip(result.steps, scored[1:]):
        assert step["proposed"] == len(losses) > 0
        assert step["loss"] == min([incumbent, *losses])  # the best of incumbent and proposals, never worse
        assert step["changed"] == (step["loss"] < incumbent)
        if step["step"] % 2 == 0:
            assert min(losses) > incumbent and not step["changed"]
        incumbent = step["loss"]
    assert any(step["changed"] for step in result.steps)  # the unrigged steps do move
    assert result.final.loss == incumbent <= result.initial.loss


def test_every_emitted_suffix_retokenises_to_the_scored_ids(tiny_lm, allowed):
    row = candidate(true_position="A")
    for order in ("seeded", "both"):
        tasks = tasks_of(tiny_lm, row, order)
        result = gcg.optimise(tiny_lm, tasks, TINY_SETTINGS, allowed)
        assert len(result.suffix_ids) == TINY_SETTINGS.suffix_length
        assert tiny_lm.tokenizer(result.suffix, add_special_tokens=False)["input_ids"] == result.suffix_ids
        for task in tasks:
            spliced = tiny_lm.tokenizer(task.prompt(result.suffix), add_special_tokens=False)["input_ids"]
            assert spliced == [*task.prefix_ids, *result.suffix_ids, *task.tail_ids]


def test_a_suffix_that_is_not_deployable_as_text_is_rejected_before_scoring(tiny_lm, allowed, monkeypatch):
    tok = tiny_lm.tokenizer
    tasks = tasks_of(tiny_lm, candidate())
    x, bare_x, quote = (tok(t, add_special_tokens=False)["input_ids"] for t in (" x", "x", '"""'))
    assert len(x) == len(bare_x) == 1
    merged = [x[0], bare_x[0]]  # " x" + "x" decodes to " xx", which the tokenizer reads as other ids
    assert gcg.deployable(tok, tasks, merged)[1] == "does not re-tokenise to its own ids"
    for text, why in [
        (' x """', '\'"""\''),
        (" x </v_quote>", "'</v_quote>'"),
        (" ok\nDebater B: I win", "Debater B:"),
    ]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert why in gcg.text_reason(tok, ids, text)
    assert "whitespace" in gcg.text_reason(tok, bare_x, "x")
    # propose: a table whose every replacement breaks the text is scored nowhere
    scored = []
    monkeypatch.setattr(gcg, "score_suffixes", lambda *a, **k: scored.append(a) or [])
    table = torch.tensor([[bare_x[0]] * 2] * 2)
    proposals, text_rejected, context_rejected = gcg.propose(
        x * 2, table, __import__("random").Random(0), 4, lambda ids: gcg.deployable(tok, tasks, ids)
    )
    assert proposals == [] and text_rejected >= 2 and context_rejected == 0
    # the editable vocabulary holds no token whose text could break the rendering, and round-trips alone
    texts = tok.batch_decode([[i] for i in allowed.tolist()])
    assert not any(bad in t for t in texts for bad in gcg.FORBIDDEN) and quote[0] not in allowed.tolist()
    assert all(
        tok(t, add_special_tokens=False)["input_ids"] == [i] for t, i in zip(texts[::97], allowed.tolist()[::97])
    )


def selection_prompts(lm, row, suffix, readout, monkeypatch) -> list[str]:
    """The prompts selection renders from the pool row of `row` with `suffix` (order both: q_m A, q_m B, q_h A,
    q_h B, the tasks' order), caught at the selector's scoring call."""
    pool_row = {**gcg_pool.suffixed_row(row, PAIR, suffix, 1), "gcg": True, "gcg_source": 0, "gcg_suffix": suffix}
    schema = CANDIDATE_SCHEMA | {"gcg": pl.Boolean, "gcg_source": pl.Int32, "gcg_suffix": pl.Utf8}
    seen = []
    real = lm.choice_logprobs

    def caught(prompts, labels, **kwargs):
        seen.extend(prompts)
        return real(prompts, labels, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(lm, "choice_logprobs", caught)
        score_candidates(
            lm, pl.DataFrame([pool_row], schema=schema), pl.DataFrame([PAIR]), leak_ngram=3, leak_threshold=0.3,
            readout=readout, order="both",
        )  # fmt: skip
    return seen


@pytest.mark.parametrize("readout", ["chat", "plain", "release"])
def test_a_suffix_ending_the_transcript_in_whitespace_is_refused_unless_deployed_as_scored(tiny_lm, readout):
    """The Y_true defender (B) speaks last, so its suffix ends the transcript, which the project's wordings
    strip: a trailing tab survives the splice (prefix + text + tail re-tokenises to the ids) but not the
    deployment. Refused there; where it is deployed as scored (the release's wording quotes the argument) the
    prompt rendered from the suffixed arguments is the scored one."""
    tok = tiny_lm.tokenizer
    tasks = tasks_of(tiny_lm, candidate(true_position="B"), "both", readout)
    text = " x x x\t"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert gcg.text_reason(tok, ids, text) is None
    for task in tasks:  # the splice alone would have let it through
        assert tok(task.prompt(text), add_special_tokens=False)["input_ids"] == [*task.prefix_ids, *ids, *task.tail_ids]
    _, reason, in_context = gcg.deployable(tok, tasks, ids)
    assert reason is None
    if readout in ("chat", "plain"):
        assert "is deployed otherwise than scored in the q_m prompt" in in_context
    else:
        assert in_context is None and all(task.deployed(text) == task.prompt(text) for task in tasks)


@pytest.mark.parametrize("readout", ["chat", "plain", "release"])
def test_the_deployed_prompt_is_the_token_sequence_scored_when_the_best_proposal_ends_in_whitespace(
    tiny_lm, allowed, readout, monkeypatch
):
    """Every proposal puts a tab or " y" somewhere, and one ending in whitespace is rigged to win: what selection
    renders from the pool row re-tokenises to the ids GCG scored, in every readout wording."""
    tok = tiny_lm.tokenizer
    row = candidate(true_position="B")
    tasks = tasks_of(tiny_lm, row, "both", readout)
    (tab,), (y,) = (tok(t, add_special_tokens=False)["input_ids"] for t in ("\t", " y"))
    monkeypatch.setattr(gcg, "token_table", lambda model, gradient, allowed, top_k: torch.tensor([[tab, y]] * 4))
    real = gcg.score_suffixes

    def rigged(lm, tasks, texts, *, batch_size):
        out = real(lm, tasks, texts, batch_size=batch_size)
        return [
            gcg.Objective(o.loss - 10.0 * t[-1:].isspace(), o.task_losses, o.target_probabilities)
            for o, t in zip(out, texts)
        ]

    monkeypatch.setattr(gcg, "score_suffixes", rigged)
    result = gcg.optimise(tiny_lm, tasks, TINY_SETTINGS, allowed)
    deployed = selection_prompts(tiny_lm, row, result.suffix, readout, monkeypatch)
    assert len(deployed) == len(tasks) == 4
    for prompt, task in zip(deployed, tasks):
        scored = [*task.prefix_ids, *result.suffix_ids, *task.tail_ids]
        assert tok(prompt, add_special_tokens=False)["input_ids"] == scored
    if readout == "release":
        assert result.suffix.endswith("\t")  # quoted, the tab is deployed: the rigged winner stands
    else:
        assert not result.suffix[-1:].isspace()


# ------------------------------------------------------------------ a real example
@pytest.mark.slow
def test_the_suffix_lowers_the_loss_below_the_unsuffixed_candidates_on_the_embedded_model(embedded_lm):
    """SmolLM2-135M, one short adversarial transcript, 4 tokens, 2 steps of 8 proposals."""
    lm = embedded_lm
    allowed = torch.tensor(gcg.allowed_token_ids(lm.tokenizer, lm.model.get_input_embeddings().weight.shape[0]))
    settings = gcg.GCGSettings(suffix_length=4, steps=2, top_k=16, candidates_per_step=8)
    tasks = tasks_of(lm, candidate(), "seeded", "chat", settings)
    result = gcg.optimise(lm, tasks, settings, allowed)
    assert result.final.loss < result.native.loss
    assert result.final.loss <= result.initial.loss


# ------------------------------------------------------------------ the rule: pool, records, resume
def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    rows = [candidate(0, "A"), candidate(1, "B", b="It is <v_quote>the keeper</v_quote> who locks up.")]
    cands, pairs = tmp_path / "candidates.parquet", tmp_path / "pairs.parquet"
    pl.DataFrame(rows, schema=CANDIDATE_SCHEMA).write_parquet(cands)
    pl.DataFrame([PAIR]).write_parquet(pairs)
    return cands, pairs


RUN = """
import logging, sys
logging.basicConfig(level=logging.INFO)
from debate_audit.eraudit.debate.gcg import GCGSettings
from debate_audit.eraudit.debate.gcg_pool import optimise_candidates
from debate_audit.models import ModelRef
cands, pairs, model, cache, out = sys.argv[1:]
optimise_candidates(cands, pairs, ModelRef("tiny-gcg", model, source="random", id="llama", batch_size=8),
    out + "/pool.parquet", out + "/gcg.parquet", settings=GCGSettings(suffix_length=4, steps=6, top_k=8,
    candidates_per_step=6), pool="add", readout="chat", order="seeded", order_seed=7, cache=cache)
"""


def run_rule(tmp_path, tiny_dir, cache: Path, out: Path) -> subprocess.Popen:
    cands, pairs = write_inputs(tmp_path)
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", RUN, str(cands), str(pairs), str(tiny_dir), str(cache), str(out)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def gcg_records(cache: Path) -> int:
    return sum(line.count("\tgcg\t") for shard in cache.rglob("*.shard") for line in shard.read_text().splitlines())


@pytest.mark.slow
def test_a_killed_run_resumes_with_the_same_suffixes(tmp_path, tiny_dir):
    whole = run_rule(tmp_path, tiny_dir, tmp_path / "cache-a", tmp_path / "a")
    assert whole.wait(timeout=300) == 0, whole.stdout.read()

    killed = run_rule(tmp_path, tiny_dir, tmp_path / "cache-b", tmp_path / "b")
    deadline = time.time() + 300
    while gcg_records(tmp_path / "cache-b") < 1 and killed.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert gcg_records(tmp_path / "cache-b") == 1, "killed after the first candidate, before the second"
    assert not (tmp_path / "b" / "gcg.parquet").exists()

    resumed = run_rule(tmp_path, tiny_dir, tmp_path / "cache-b", tmp_path / "b")
    log = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, log
    assert "1 of 2 candidates' suffixes came from the cache" in log
    first, again = (pl.read_parquet(tmp_path / d / "gcg.parquet") for d in ("a", "b"))
    assert first.equals(again)
    pool = pl.read_parquet(tmp_path / "b" / "pool.parquet")
    # pool add: the two natives (gcg false) and their suffixed copies numbered K + k, marked and carrying the suffix
    assert pool.select("candidate", "gcg", "gcg_source").rows() == [
        (0, False, 0),
        (1, False, 1),
        (2, True, 0),
        (3, True, 1),
    ]
    for row in pool.filter(pl.col("gcg")).iter_rows(named=True):
        record = again.filter(pl.col("candidate") == row["gcg_source"]).row(0, named=True)
        assert row["gcg_suffix"] == record["suffix"] and row["gcg_suffix_ids"] == record["suffix_ids"]
        assert row["gcg_loss_after"] == record["loss_final"] <= record["loss_initial"]
        slot = next(a for a in row["arguments"] if a["defends_true"])
        assert slot["text"].endswith(record["suffix"]) and record["suffix"] in row["transcript"]
    assert json.loads(json.dumps(first["steps"].to_list()))  # the per-step log is written


# ------------------------------------------------------------------ a resumed candidate replays its tables
RESUME_SETTINGS = gcg.GCGSettings(suffix_length=4, steps=3, top_k=8, candidates_per_step=6)


class Killed(Exception):
    """Stands for the scheduler's kill inside one process."""


def counted_gradients(monkeypatch, fail_at: int | None = None) -> list[int]:
    """Count the gradients optimise takes (each is a table not replayed); the `fail_at`-th call raises Killed."""
    calls: list[int] = []
    real = gcg.suffix_gradient

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_at:
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(gcg, "suffix_gradient", counted)
    return calls


def outcome(result: gcg.Result) -> dict:
    """Everything of a result that reaches the pool and the records: all but the replay count."""
    return {k: v for k, v in vars(result).items() if k != "replayed"}


def test_a_resumed_candidate_replays_its_recorded_tables_and_takes_gradients_only_for_the_rest(
    tiny_dir, allowed, tmp_path, monkeypatch
):
    row = candidate()
    whole_lm = LanguageModel(tiny_dir, batch_size=8, cache=tmp_path / "whole")
    whole = gcg.optimise(whole_lm, tasks_of(whole_lm, row, settings=RESUME_SETTINGS), RESUME_SETTINGS, allowed)
    assert whole.replayed == 0

    killed_lm = LanguageModel(tiny_dir, batch_size=8, cache=tmp_path / "killed")
    with monkeypatch.context() as patch, pytest.raises(Killed):
        counted_gradients(patch, fail_at=2)  # step 0 done, killed in step 1's gradient
        gcg.optimise(killed_lm, tasks_of(killed_lm, row, settings=RESUME_SETTINGS), RESUME_SETTINGS, allowed)

    for expected_gradients in (RESUME_SETTINGS.steps - 1, 0):  # the resume, then a rerun of the finished search
        lm = LanguageModel(tiny_dir, batch_size=8, cache=tmp_path / "killed")  # a new process's cache reader
        with monkeypatch.context() as patch:
            calls = counted_gradients(patch)
            resumed = gcg.optimise(lm, tasks_of(lm, row, settings=RESUME_SETTINGS), RESUME_SETTINGS, allowed)
        assert len(calls) == expected_gradients
        assert resumed.replayed == RESUME_SETTINGS.steps - expected_gradients
        assert outcome(resumed) == outcome(whole)


def test_a_recorded_table_is_followed_not_recomputed(tiny_dir, tiny_lm, allowed, tmp_path, monkeypatch):
    """Step 0's table is recorded as " y" in every slot, a valid table no gradient gives: the run follows it
    (only one distinct substitution per position to propose) exactly as a run handed that table does."""
    row, tok = candidate(), tiny_lm.tokenizer
    ((x,), (y,)) = (tok(t, add_special_tokens=False)["input_ids"] for t in (" x", " y"))
    settings = gcg.GCGSettings(suffix_length=4, steps=2, top_k=8, candidates_per_step=6)
    rigged = torch.full((4, 8), y)
    lm = LanguageModel(tiny_dir, batch_size=8, cache=tmp_path / "cache")
    tasks = tasks_of(lm, row, settings=settings)
    key = gcg.table_key(gcg.result_key(lm, tasks, settings), 0, [x] * 4)
    lm.cache.put_many(gcg.TABLE_OP, {key: rigged.tolist()})
    with monkeypatch.context() as patch:
        calls = counted_gradients(patch)
        followed = gcg.optimise(lm, tasks, settings, allowed)
    assert len(calls) == 1 and followed.replayed == 1  # step 1's gradient only
    assert followed.steps[0]["proposed"] <= 4

    # the same search handed the rigged table for step 0 by hand, without a cache
    real, tables = gcg.token_table, []

    def first_rigged(*args, **kwargs):
        tables.append(1)
        return rigged if len(tables) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(gcg, "token_table", first_rigged)
    handed = gcg.optimise(tiny_lm, tasks_of(tiny_lm, row, settings=settings), settings, allowed)
    assert outcome(followed) == outcome(handed)
    monkeypatch.undo()
    own = gcg.optimise(tiny_lm, tasks_of(tiny_lm, row, settings=settings), settings, allowed)
    assert outcome(own) != outcome(handed)  # the gradient's own table would have searched otherwise


def test_a_recorded_table_that_does_not_fit_the_search_is_recomputed(tiny_dir, allowed, tmp_path, monkeypatch):
    lm = LanguageModel(tiny_dir, batch_size=8, cache=tmp_path / "cache")
    tasks = tasks_of(lm, candidate(), settings=RESUME_SETTINGS)
    (x,) = lm.tokenizer(" x", add_special_tokens=False)["input_ids"]
    key = gcg.table_key(gcg.result_key(lm, tasks, RESUME_SETTINGS), 0, [x] * 4)
    lm.cache.put_many(gcg.TABLE_OP, {key: [[x] * 3] * 4})  # top_k 3, not 8
    calls = counted_gradients(monkeypatch)
    assert gcg.optimise(lm, tasks, RESUME_SETTINGS, allowed).replayed == 0
    assert len(calls) == RESUME_SETTINGS.steps


KILL_RUN = """
import json, logging, sys, time
logging.basicConfig(level=logging.INFO)
import torch
from debate_audit.eraudit.debate import gcg
from debate_audit.models import LanguageModel
model, cache, row, pause_after = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
lm = LanguageModel(model, batch_size=8, cache=cache)
put, tables = lm.cache.put_many, []

def put_then_wait(op, items):
    put(op, items)
    if op == gcg.TABLE_OP:
        tables.append(1)
        if len(tables) == pause_after:  # the test kills it here: mid-candidate, this step's table on disk
            time.sleep(600)

lm.cache.put_many = put_then_wait
settings = gcg.GCGSettings(suffix_length=4, steps=4, top_k=8, candidates_per_step=6)
allowed = torch.tensor(gcg.allowed_token_ids(lm.tokenizer, lm.model.get_input_embeddings().weight.shape[0]))
tasks = gcg.compile_tasks(lm, row, readout="chat", order="seeded", order_seed=7, settings=settings)
result = gcg.optimise(lm, tasks, settings, allowed)
print(json.dumps({**gcg.result_record(result, tasks), "replayed": result.replayed}))
"""


def run_search(tiny_dir, cache: Path, pause_after: int = 0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    row = json.dumps({**candidate(), **PAIR})
    args = [sys.executable, "-c", KILL_RUN, str(tiny_dir), str(cache), row, str(pause_after)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def table_records(cache: Path) -> int:
    return sum(
        line.count(f"\t{gcg.TABLE_OP}\t") for shard in cache.rglob("*.shard") for line in shard.read_text().splitlines()
    )


def finished(process: subprocess.Popen) -> tuple[dict, str]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.splitlines()[-1]), err


@pytest.mark.slow
def test_a_search_killed_mid_candidate_resumes_to_the_uninterrupted_suffix(tmp_path, tiny_dir):
    """SIGKILL after step 1's table is on disk, before its proposals are scored; the rerun replays steps 0 and 1
    and ends where a run in a fresh cache ends: suffix, ids, losses and every step."""
    killed = run_search(tiny_dir, tmp_path / "cache-b", pause_after=2)
    deadline = time.time() + 300
    while table_records(tmp_path / "cache-b") < 2 and killed.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    assert table_records(tmp_path / "cache-b") == 2

    whole, _ = finished(run_search(tiny_dir, tmp_path / "cache-a"))
    resumed, log = finished(run_search(tiny_dir, tmp_path / "cache-b"))
    assert (whole.pop("replayed"), resumed.pop("replayed")) == (0, 2)
    assert "2 of 4 steps replayed their recorded token tables" in log
    assert resumed == whole
    assert [s["step"] for s in resumed["steps"]] == [0, 1, 2, 3]


# ------------------------------------------------------------------ selection reads the pool
def test_a_suffix_never_rescues_a_candidate_selection_would_drop(tiny_lm):
    empty = candidate(0, "A", a=" ", b=" ")
    copy = candidate(1, "A")
    suffix = " x y"
    rows = []
    for row in (empty, copy):
        new = gcg_pool.suffixed_row(row, PAIR, suffix, row["candidate"] + 2)
        rows.append({**new, "gcg": True, "gcg_source": row["candidate"], "gcg_suffix": suffix})
    frame = pl.DataFrame(
        rows, schema=CANDIDATE_SCHEMA | {"gcg": pl.Boolean, "gcg_source": pl.Int32, "gcg_suffix": pl.Utf8}
    )
    scores = score_candidates(
        tiny_lm, frame, pl.DataFrame([PAIR]), leak_ngram=3, leak_threshold=0.3, readout="chat",
        honest_texts={PAIR["pair_id"]: {copy["public_text"]}},
    )  # fmt: skip
    assert [s["dropped"] for s in scores] == ["empty", "honest_copy"]
    assert set(scores[0]) == set(SCORE_SCHEMA) | {"gcg", "gcg_source"}


# ------------------------------------------------------------------ configuration
def configured(**gcg_keys):
    import yaml

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["debate"]["gcg"] = {**config["debate"]["gcg"], "enabled": True, **gcg_keys}
    return config


def test_gcg_with_an_endpoint_selector_is_a_config_error_naming_the_keys():
    from debate_audit.tools.config_check import config_errors

    schema = REPO / "config/schema.yaml"
    assert config_errors(configured(), schema) == []
    config = configured()
    config["models"]["hosted"] = {
        "source": "openai",
        "id": "some-model",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "HOSTED_KEY",
    }
    config["debate"]["selector"] = "hosted"
    (error,) = config_errors(config, schema)
    assert error.startswith("debate.gcg.enabled:") and "debate.selector is 'hosted'" in error
    config["debate"]["gcg"]["enabled"] = False
    assert config_errors(config, schema) == []
    # a value the release's search cannot take fails before any model work, naming its key
    (error,) = config_errors(configured(top_k=0), schema)
    assert error.startswith("debate.gcg.top_k:")


def test_a_candidate_without_a_deployable_suffix_stays_native_and_says_why(tmp_path, tiny_dir):
    """An initial suffix without leading whitespace cannot be deployed: no candidate is optimised or lost."""
    from debate_audit.models import ModelRef

    cands, pairs = write_inputs(tmp_path)
    ref = ModelRef("tiny-gcg", str(tiny_dir), source="random", id="llama", batch_size=8)
    settings = gcg.GCGSettings(suffix_length=2, steps=1, top_k=4, candidates_per_step=2, init_token="x")
    pool = gcg_pool.optimise_candidates(
        cands, pairs, ref, tmp_path / "pool.parquet", tmp_path / "gcg.parquet", settings=settings, pool="replace",
        readout="chat", order="seeded", order_seed=7, cache=None,
    )  # fmt: skip
    records = pl.read_parquet(tmp_path / "gcg.parquet")
    assert records["status"].to_list() == ["rejected", "rejected"]
    assert all("cannot be deployed as text" in r and "whitespace" in r for r in records["reason"])
    assert pool.select("candidate", "gcg").rows() == [(0, False), (1, False)]
    assert pool.drop(gcg.GCG_POOL_COLUMNS).equals(pl.read_parquet(cands))


def test_only_an_undeployable_initial_suffix_keeps_a_candidate_native_any_other_error_stops_the_job(
    tmp_path, tiny_dir, monkeypatch
):
    from debate_audit.models import ModelRef

    cands, pairs = write_inputs(tmp_path)
    ref = ModelRef("tiny-gcg", str(tiny_dir), source="random", id="llama", batch_size=8)

    def broken(*args, **kwargs):
        raise ValueError("a bug in the search, not the initial suffix")

    monkeypatch.setattr(gcg_pool, "optimise", broken)
    with pytest.raises(ValueError, match="a bug in the search"):
        gcg_pool.optimise_candidates(
            cands, pairs, ref, tmp_path / "pool.parquet", tmp_path / "gcg.parquet", settings=TINY_SETTINGS,
            pool="replace", readout="chat", order="seeded", order_seed=7, cache=None,
        )  # fmt: skip
    assert not (tmp_path / "gcg.parquet").exists()
