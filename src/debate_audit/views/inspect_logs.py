"""The experiments as inspect_ai eval logs, for `inspect view` and the other tools that read that format.

Written from the Parquet artifacts alone (no model is called), one log per experiment:

- `cwpor.eval`: a sample per CW-POR judgment (debater model x judge x word limit x question). Input: the
  question and the two responses as the judge saw them; target: the correct answer's letter; output: the
  judge's reply; scores: `persuaded` (the text choice is the falsehood; absent when the choice did not
  parse), `llc_persuaded`, `rubric_confidence`, `llc`, `combined_confidence`.
- `er_audit_verifiers.eval`: a sample per verifier readout (architecture x dataset x checkpoint x pair x
  q_m / q_h). Scores: `correct`, `p_correct`.
- `er_audit_audit.eval`: a sample per scored audit question (architecture x dataset x setting x target x
  pair x q_h or paraphrase, the search pool and the test pools; an audit of models you bring is a section of
  its own, its targets under their model names). Scores: `delta`, `counterexample`
  (Delta > epsilon), and, for test-pool draws, the bounds after that step.

Every sample's metadata holds the row's other columns, so nothing of the Parquet row is lost; the log's
`eval.metadata` names the files it was written from. A log's creation time is fixed (`CREATED`) and its
`eval_id` is the hash of those files' bytes, so one set of artifacts always gives one id.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.eraudit.common.verifiers import VERIFIERS
from debate_audit.runtime.provenance import project_version

CREATED = "2000-01-01T00:00:00+00:00"  # a log says when it was made; these are made from fixed artifacts


def _clean(value: Any) -> Any:
    """JSON-safe metadata values (NaN and infinities become None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _log(
    task: str, model: str, samples: list[Any], scorers: Sequence[str], sources: Sequence[str | Path], description: str
) -> Any:
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalScore, EvalSpec, EvalStats

    digest = hashlib.sha256()
    for path in sources:
        digest.update(Path(path).read_bytes())
    spec = EvalSpec(
        eval_id=f"{task}-{digest.hexdigest()[:16]}",
        created=CREATED,
        task=task,
        task_id=task,
        task_description=description,
        dataset=EvalDataset(name=task, samples=len(samples), sample_ids=[s.id for s in samples]),
        model=model,
        config=EvalConfig(),
        metadata={"sources": [str(p) for p in sources], "debate_audit": project_version()},
    )
    scores = [EvalScore(name=name, scorer=name) for name in scorers]
    results = EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores)
    stats = EvalStats(started_at=CREATED, completed_at=CREATED)
    return EvalLog(status="success", eval=spec, results=results, stats=stats, samples=samples)


def _sample(
    id_: str, input_: str, target: str, output: str, model: str, scores: Mapping[str, Any], metadata: Mapping[str, Any]
) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    return EvalSample(
        id=id_,
        epoch=1,
        input=input_,
        target=target,
        output=ModelOutput.from_content(model, output),
        scores={k: Score(value=v) for k, v in scores.items() if v is not None},
        metadata={k: _clean(v) for k, v in metadata.items()},
    )


def _concat(paths: Iterable[str | Path]) -> pl.DataFrame:
    frames = [pl.read_parquet(p) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


# ------------------------------------------------------------------------------------------- CW-POR
def cwpor_log(*, questions: str | Path, responses: Sequence[str | Path], judgments: Sequence[str | Path]) -> Any:
    """The CW-POR judgments as one eval log (module docstring)."""
    qs = pl.read_parquet(questions).select("question_id", "question", "best_answer", "falsehood")
    shown = (
        _concat(responses)
        .filter(pl.col("role").is_in(["neutral", "persuasive"]))
        .select("model", "verbosity", "question_id", "role", "response")
    )
    wide = shown.pivot(on="role", index=["model", "verbosity", "question_id"], values="response")
    rows = (
        _concat(judgments)
        .join(qs, on="question_id", how="left")
        .join(wide, on=["model", "verbosity", "question_id"], how="left")
        .sort("model", "judge_model", "protocol", "verbosity", "question_id")
    )
    samples = []
    for r in rows.iter_rows(named=True):
        correct, other = r["correct_position"], "B" if r["correct_position"] == "A" else "A"
        answers = {correct: r["neutral"], other: r["persuasive"]}
        text = f"{r['question']}\n\nAnswer A: {answers['A']}\n\nAnswer B: {answers['B']}"
        scores = {
            "persuaded": None if r["override"] is None else int(r["override"]),
            "llc_persuaded": int(r["llc_override"]),
            "rubric_confidence": r["rubric_confidence"],
            "llc": r["llc"],
            "combined_confidence": r["combined_confidence"],
        }
        meta = {k: v for k, v in r.items() if k not in ("question", "raw_judgment", "neutral", "persuasive")}
        id_ = f"{r['model']}/{r['judge_model']}/{r['protocol']}/v{r['verbosity']}/q{r['question_id']}"
        samples.append(_sample(id_, text, correct, r["raw_judgment"] or "", r["judge_model"], scores, meta))
    models = sorted(set(rows["judge_model"].to_list())) if rows.height else []
    return _log(
        "cwpor",
        "debate-audit/" + ",".join(models),
        samples,
        ["persuaded", "llc_persuaded", "rubric_confidence", "llc", "combined_confidence"],
        [questions, *responses, *judgments],
        "CW-POR: a neutral and a persuasive agent answer a TruthfulQA question; the judge picks one",
    )


# ------------------------------------------------------------------------------------------- ER-Audit
def verifiers_log(*, readouts: Sequence[str | Path], pairs: Mapping[str, str | Path]) -> Any:
    """The verifiers' readouts (verifier_evaluate's eval.parquet files) as one eval log. `pairs`: dataset ->
    its prepared pairs (the question texts and answers). No readout (ER-Audit part 1 off: only models you
    bring are audited): a log without samples."""
    description = "ER-Audit: each verifier's forced-choice readout of q_m and q_h (Table 1's rows)"
    if not readouts:
        return _log("er_audit_verifiers", "debate-audit/verifiers", [], ["correct", "p_correct"], [], description)
    texts = pl.concat(
        [
            pl.read_parquet(p)
            .select("pair_id", "q_m", "q_h", "y_true", "h_true")
            .with_columns(pl.lit(d).alias("dataset"))
            for d, p in pairs.items()
        ]
    )
    samples = []
    frame = _concat(readouts).join(texts, on=["dataset", "pair_id"], how="left")
    for r in frame.iter_rows(named=True):
        question, answer = (r["q_m"], r["y_true"]) if r["question"] == "q_m" else (r["q_h"], r["h_true"])
        meta = {k: v for k, v in r.items() if k not in ("q_m", "q_h")}
        cell = "/".join(str(r[k]) for k in ("architecture", "dataset", "length", "verifier") if r.get(k) is not None)
        weight = f"/qh{r['qh_weight']:g}" if r.get("qh_weight") is not None else ""
        samples.append(
            _sample(
                f"{cell}{weight}/p{r['pair_id']}/{r['question']}",
                question,
                answer,
                f"P(correct) = {r['p_correct']:.6f}",
                r["architecture"],
                {"correct": int(r["correct"]), "p_correct": r["p_correct"]},
                meta,
            )
        )
    return _log(
        "er_audit_verifiers",
        "debate-audit/verifiers",
        samples,
        ["correct", "p_correct"],
        [*readouts, *pairs.values()],
        description,
    )


def audit_log(*, audits: Mapping[str, Mapping[str, str | Path]]) -> Any:
    """The audits' scored questions as one eval log. `audits`: section name (architecture / dataset /
    setting) -> its `deltas`, `records` and `steps` files."""
    samples, sources = [], []
    for section, files in audits.items():
        sources += [files["deltas"], files["records"], files["steps"]]
        deltas = pl.read_parquet(files["deltas"])
        records = pl.read_parquet(files["records"]).select("target", "pair_id", "epsilon")
        steps = pl.read_parquet(files["steps"]).select(
            "target", "pair_id", pl.col("generator").alias("pool"), "index", "t", "lower_bound", "lower_bound_betting"
        )
        frame = deltas.join(records, on=["target", "pair_id"], how="left").join(
            steps, on=["target", "pair_id", "pool", "index"], how="left", nulls_equal=True
        )
        for r in frame.iter_rows(named=True):
            where = "q_h" if r["kind"] == "q_h" else f"{r['pool']}{r['index']}"
            degraded = None if r["delta"] is None or r["epsilon"] is None else int(not r["delta"] <= r["epsilon"])
            scores = {
                "delta": r["delta"],
                "counterexample": degraded,
                "lower_bound": r["lower_bound"],
                "lower_bound_betting": r["lower_bound_betting"],
            }
            id_ = f"{section}/{r['target']}/p{r['pair_id']}/{where}"
            samples.append(
                _sample(
                    id_,
                    r["question"],
                    "",
                    f"Delta = {r['delta']}",
                    # a model you bring (eraudit/audit/brought.py) under its own name
                    f"V_{r['target']}" if r["target"] in VERIFIERS else r["target"],
                    scores,
                    {"section": section, **{k: v for k, v in r.items() if k != "question"}},
                )
            )
    return _log(
        "er_audit_audit",
        "debate-audit/audit",
        samples,
        ["delta", "counterexample", "lower_bound", "lower_bound_betting"],
        sources,
        "ER-Audit: Delta of every audited question (q_h, its search and test paraphrases) per target",
    )


def write_logs(
    *,
    cwpor: str | Path,
    verifiers: str | Path,
    audit: str | Path,
    questions: str | Path,
    responses: Sequence[str | Path],
    judgments: Sequence[str | Path],
    readouts: Sequence[str | Path],
    pairs: Mapping[str, str | Path],
    audits: Mapping[str, Mapping[str, str | Path]],
) -> None:
    from inspect_ai.log import write_eval_log

    for log, out in (
        (cwpor_log(questions=questions, responses=responses, judgments=judgments), cwpor),
        (verifiers_log(readouts=readouts, pairs=pairs), verifiers),
        (audit_log(audits=audits), audit),
    ):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_eval_log(log, str(out), format="eval")
