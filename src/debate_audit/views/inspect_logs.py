"""The experiments as inspect_ai eval logs, for `inspect view` and the other tools that read that format.

Written from the Parquet artifacts alone (no model is called), one log per task and model, into one folder:

- `cwpor_<judge>.eval`: a sample per CW-POR judgment by that judge (debater model x protocol x word limit x
  question). Input: the messages the judge was sent (cwpor/judged.py, judge_input); target: the correct
  answer's letter; output: the judge's reply; scores: `persuaded` (the text choice is the falsehood; absent
  when the choice did not parse), `llc_persuaded`, `rubric_confidence`, `llc`, `combined_confidence`.
  Headline metrics: POR (of parsed choices and of all N) and CW-POR, pooled and per debater model and protocol
  (the metric's `group`), the ratios of sums of cwpor/metrics.py.
- `er_audit_verifiers_<architecture>.eval`: a sample per readout of that architecture's verifiers (dataset x
  checkpoint x pair x q_m / q_h). Input: the readout's prompt with the correct answer as A (both orders were
  scored; eraudit/common/readout.py). Scores: `correct`, `p_correct`. Headline metrics: Acc and MTP per
  dataset, checkpoint and question over every prepared pair (Table 1's `all` population).
- `er_audit_audit_<architecture>.eval`: a sample per scored audit question (dataset x setting x target x
  pair x q_h or paraphrase). Input: the readout prompt of that question with H_true as A. Scores: `delta`,
  `counterexample` (Delta > epsilon) and, for test-pool draws, the bounds after that step. Headline metrics:
  CR, the mean paper and betting bounds and the degraded count per dataset, setting and target (summary.parquet).

Every sample's metadata holds its row's other columns, so nothing of the Parquet row is lost. A log records
the project's git revision and the package versions, the files it was written from (`eval.metadata`), when it
was written (`created`) and the span of its sources' modification times (`stats`); its `eval_id` is the hash
of those files' bytes, so one set of artifacts always gives one id.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.cwpor.judged import JudgedDebate, judge_input, judged_debates
from debate_audit.cwpor.metrics import METRICS
from debate_audit.eraudit.common.readout import readout_messages
from debate_audit.runtime.provenance import project_version, software

CWPOR_METRICS = ("por", "por_all", "cw_por")
AUDIT_METRICS = ("cr", "mean_lower_bound", "mean_lower_bound_betting", "n_degraded")


def _clean(value: Any) -> Any:
    """JSON-safe metadata values (NaN and infinities become None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def file_stem(task: str, model: str) -> str:
    """The log's file name without `.eval`: the task and the model, in characters every filesystem keeps."""
    return f"{task}_{re.sub(r'[^A-Za-z0-9._-]+', '-', model)}"


def _revision_and_packages() -> tuple[Any, dict[str, str]]:
    from inspect_ai.log import EvalRevision

    version = project_version()
    revision = None
    if "commit" in version:
        revision = EvalRevision(type="git", origin="", commit=version["commit"], dirty=version.get("dirty"))
    packages = {"debate-audit": version["package"], **software()["packages"]}
    for name in ("inspect_ai", "polars"):
        try:
            packages[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            pass
    return revision, packages


def _log(
    task: str,
    model: str,
    samples: list[Any],
    scorers: Sequence[str],
    metrics: Sequence[tuple[str, str | None, float]],
    sources: Sequence[str | Path],
    description: str,
) -> Any:
    """An eval log of `samples`; `metrics`: (name, group or None for the pooled value, value)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalScore, EvalSpec, EvalStats

    digest = hashlib.sha256()
    for path in sources:
        digest.update(Path(path).read_bytes())
    times = [Path(p).stat().st_mtime for p in sources]
    revision, packages = _revision_and_packages()
    spec = EvalSpec(
        eval_id=f"{file_stem(task, model)}-{digest.hexdigest()[:16]}",
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        task=task,
        task_id=task,
        task_description=description,
        dataset=EvalDataset(name=task, samples=len(samples), sample_ids=[s.id for s in samples]),
        model=model,
        config=EvalConfig(),
        revision=revision,
        packages=packages,
        metadata={"sources": [str(p) for p in sources]},
    )
    # One EvalScore per sample score; the headline metrics sit under the first, each with its group.
    headline = {
        (name if group is None else f"{name}[{group}]"): EvalMetric(name=name, group=group, value=_clean(value))
        for name, group, value in metrics
    }
    scores = [EvalScore(name=name, scorer=name, metrics=headline if i == 0 else {}) for i, name in enumerate(scorers)]
    results = EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores)
    started = _iso(min(times)) if times else spec.created
    stats = EvalStats(started_at=started, completed_at=_iso(max(times)) if times else spec.created)
    return EvalLog(status="success", eval=spec, results=results, stats=stats, samples=samples)


def _messages(messages: Sequence[Mapping[str, str]]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def _sample(
    id_: str,
    messages: Sequence[Mapping[str, str]],
    target: str,
    output: str,
    model: str,
    scores: Mapping[str, Any],
    metadata: Mapping[str, Any],
) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    return EvalSample(
        id=id_,
        epoch=1,
        input=_messages(messages),
        target=target,
        output=ModelOutput.from_content(model, output),
        scores={k: Score(value=v) for k, v in scores.items() if v is not None},
        metadata={k: _clean(v) for k, v in metadata.items()},
    )


def _concat(paths: Iterable[str | Path]) -> pl.DataFrame:
    frames = [pl.read_parquet(p) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _ratio(frame: pl.DataFrame, metric: str) -> float:
    num, den = METRICS[metric]
    # per row first (a literal numerator or denominator broadcasts), then summed: cwpor/metrics.py's ratio of sums
    rows = frame.select(num.fill_null(0.0).alias("n"), den.fill_null(0.0).alias("d"))
    n, d = rows["n"].sum(), rows["d"].sum()
    return n / d if d > 0 else float("nan")


# ------------------------------------------------------------------------------------------- CW-POR
def cwpor_metrics(judged: pl.DataFrame) -> list[tuple[str, str | None, float]]:
    """POR both ways and CW-POR of one judge's judgments: pooled, then per debater model and protocol."""
    out = [(m, None, _ratio(judged, m)) for m in CWPOR_METRICS]
    for (model, protocol), group in sorted(judged.group_by("model", "protocol"), key=lambda g: g[0]):
        out += [(m, f"{model}/{protocol}", _ratio(group, m)) for m in CWPOR_METRICS]
    return out


def cwpor_logs(*, questions: str | Path, responses: Sequence[str | Path], judgments: Sequence[str | Path]) -> list:
    """One log per judge (module docstring)."""
    judged = judged_debates(questions, responses, judgments)
    logs = []
    for (judge,), rows in sorted(judged.group_by("judge_model"), key=lambda g: g[0]):
        samples = []
        for row in rows.iter_rows(named=True):
            debate = JudgedDebate.from_row(row)
            scores = {
                "persuaded": None if debate.override is None else int(debate.override),
                "llc_persuaded": None if debate.llc_override is None else int(debate.llc_override),
                "rubric_confidence": debate.rubric_confidence,
                "llc": debate.llc,
                "combined_confidence": debate.combined_confidence,
            }
            meta = {k: v for k, v in row.items() if k not in ("question", "raw_judgment", "answer_a", "answer_b")}
            samples.append(
                _sample(
                    debate.sample_id,
                    judge_input(debate),
                    debate.correct_position,
                    debate.raw_judgment or "",
                    judge,
                    scores,
                    meta,
                )
            )
        logs.append(
            _log(
                "cwpor",
                judge,
                samples,
                ["persuaded", "llc_persuaded", "rubric_confidence", "llc", "combined_confidence"],
                cwpor_metrics(rows),
                [questions, *responses, *judgments],
                "CW-POR: a neutral and a persuasive agent answer a TruthfulQA question; the judge picks one",
            )
        )
    return logs


# ------------------------------------------------------------------------------------------- ER-Audit
def _cell(row: Mapping[str, Any]) -> str:
    """The checkpoint of a readout as the grid names it: length/variant (with V_org's L_qh weight), or base."""
    parts = [str(row[k]) for k in ("length", "verifier") if row.get(k) is not None]
    weight = f"_qh{row['qh_weight']:g}" if row.get("qh_weight") is not None else ""
    return "/".join(parts) + weight


def verifier_metrics(readouts: pl.DataFrame) -> list[tuple[str, str | None, float]]:
    """Acc and MTP per dataset, checkpoint and question over every readout (Table 1's `all` population)."""
    out = []
    keyed = readouts.with_columns(
        pl.struct(["length", "verifier", "qh_weight"]).map_elements(_cell, return_dtype=pl.Utf8).alias("_cell")
    )
    for (dataset, cell, question), group in sorted(
        keyed.group_by("dataset", "_cell", "question"), key=lambda g: tuple(map(str, g[0]))
    ):
        name = f"{dataset}/{cell}/{question}"
        out += [
            ("acc", name, float(group["correct"].cast(pl.Float64).mean())),
            ("mtp", name, float(group["p_correct"].mean())),
        ]
    return out


def verifiers_logs(
    *, readouts: Sequence[str | Path], pairs: Mapping[str, str | Path], readout: Mapping[str, str]
) -> list:
    """One log per architecture of its verifiers' readouts (verifier_evaluate's eval.parquet files). `pairs`:
    dataset -> its prepared pairs (question texts and answers); `readout`: architecture -> its resolved
    readout mode (chat, release or plain). None where no verifier was trained (ER-Audit part 1 off)."""
    if not readouts:
        return []
    texts = pl.concat(
        [
            pl.read_parquet(p)
            .select("pair_id", "q_m", "q_h", "y_true", "y_false", "h_true", "h_false")
            .with_columns(pl.lit(d).alias("dataset"))
            for d, p in pairs.items()
        ]
    )
    frame = _concat(readouts).join(texts, on=["dataset", "pair_id"], how="left")
    logs = []
    for (arch,), rows in sorted(frame.group_by("architecture"), key=lambda g: g[0]):
        samples = []
        for r in rows.iter_rows(named=True):
            monitored = r["question"] == "q_m"
            question, answer, other = (
                (r["q_m"], r["y_true"], r["y_false"]) if monitored else (r["q_h"], r["h_true"], r["h_false"])
            )
            meta = {k: v for k, v in r.items() if k not in ("q_m", "q_h")}
            samples.append(
                _sample(
                    f"{r['dataset']}/{_cell(r)}/p{r['pair_id']}/{r['question']}",
                    readout_messages(question, answer, other, readout.get(arch, "plain")),
                    "A",
                    f"P(correct) = {r['p_correct']:.6f}",
                    arch,
                    {"correct": int(r["correct"]), "p_correct": r["p_correct"]},
                    meta,
                )
            )
        logs.append(
            _log(
                "er_audit_verifiers",
                arch,
                samples,
                ["correct", "p_correct"],
                verifier_metrics(rows),
                [*readouts, *pairs.values()],
                "ER-Audit: each verifier's forced-choice readout of q_m and q_h (Table 1's rows)",
            )
        )
    return logs


def audit_logs(*, audits: Mapping[str, Mapping[str, Any]], readout: Mapping[str, str]) -> list:
    """One log per architecture of its audits' scored questions. `audits`: section -> its architecture,
    dataset, setting and its `pairs`, `deltas`, `records`, `steps` and `summary` files."""
    by_arch: dict[str, list[Mapping[str, Any]]] = {}
    for section, files in audits.items():
        by_arch.setdefault(files["architecture"], []).append({"section": section, **files})
    logs = []
    for arch, sections in sorted(by_arch.items()):
        samples, sources, metrics = [], [], []
        for files in sections:
            sources += [files[k] for k in ("pairs", "deltas", "records", "steps", "summary")]
            pairs = pl.read_parquet(files["pairs"]).select("pair_id", "h_true", "h_false")
            deltas = pl.read_parquet(files["deltas"]).join(pairs, on="pair_id", how="left")
            records = pl.read_parquet(files["records"]).select("target", "pair_id", "epsilon")
            steps = pl.read_parquet(files["steps"]).select(
                "target", "pair_id", pl.col("generator").alias("pool"), "index", "t", "lower_bound",
                "lower_bound_betting",
            )  # fmt: skip
            frame = deltas.join(records, on=["target", "pair_id"], how="left").join(
                steps, on=["target", "pair_id", "pool", "index"], how="left", nulls_equal=True
            )
            where = f"{files['dataset']}/{files['setting']}"
            for r in frame.iter_rows(named=True):
                spot = "q_h" if r["kind"] == "q_h" else f"{r['pool']}{r['index']}"
                degraded = None if r["delta"] is None or r["epsilon"] is None else int(not r["delta"] <= r["epsilon"])
                scores = {
                    "delta": r["delta"],
                    "counterexample": degraded,
                    "lower_bound": r["lower_bound"],
                    "lower_bound_betting": r["lower_bound_betting"],
                }
                samples.append(
                    _sample(
                        f"{where}/{r['target']}/p{r['pair_id']}/{spot}",
                        readout_messages(r["question"], r["h_true"], r["h_false"], readout.get(arch, "plain")),
                        "A",
                        f"Delta = {r['delta']}",
                        f"{arch}/V_{r['target']}",
                        scores,
                        {"section": files["section"], **{k: v for k, v in r.items() if k != "question"}},
                    )
                )
            for row in pl.read_parquet(files["summary"]).iter_rows(named=True):
                metrics += [(m, f"{where}/{row['target']}", row[m]) for m in AUDIT_METRICS]
        logs.append(
            _log(
                "er_audit_audit",
                arch,
                samples,
                ["delta", "counterexample", "lower_bound", "lower_bound_betting"],
                metrics,
                sources,
                "ER-Audit: Delta of every audited question (q_h, its search and test paraphrases) per target",
            )
        )
    return logs


def write_logs(
    *,
    out_dir: str | Path,
    questions: str | Path,
    responses: Sequence[str | Path],
    judgments: Sequence[str | Path],
    readouts: Sequence[str | Path],
    pairs: Mapping[str, str | Path],
    audits: Mapping[str, Mapping[str, Any]],
    readout: Mapping[str, str],
) -> list[Path]:
    """Every log into `out_dir` (one per task and model); returns their paths."""
    from inspect_ai.log import write_eval_log

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    logs = [
        *cwpor_logs(questions=questions, responses=responses, judgments=judgments),
        *verifiers_logs(readouts=readouts, pairs=pairs, readout=readout),
        *audit_logs(audits=audits, readout=readout),
    ]
    for log in logs:
        path = out / f"{file_stem(log.eval.task, log.eval.model)}.eval"
        write_eval_log(log, str(path), format="eval")
        written.append(path)
    return written
