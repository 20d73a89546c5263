"""The results browser: one static HTML page with every CW-POR debate and every ER-Audit hidden question.

The page works from file:// with no server and no network: the data is embedded as gzip-compressed JSON
(base64, so it holds no '<' and cannot close its script element) and unpacked in the browser with the
standard DecompressionStream. Every text from a model or a dataset is put into the page with
textContent only, so a reply that contains HTML shows as text. The list is paged (the paper-scale run has
about 40,000 judgments per model set).

Columns are read by name and missing optional ones become null, so an output that gains columns (or an
older one that lacks a new one) still renders.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.cwpor.judged import judged_debates
from debate_audit.eraudit.audit.stats import BOUNDS

log = logging.getLogger(__name__)

PAYLOAD_VERSION = 1
PAYLOAD_MARK = "/*__PAYLOAD__*/"
HASH_MARK = "__SCRIPT_HASH__"

# What the CW-POR list shows per judgment, in this order (JSON arrays of these columns of judged.JUDGED_SCHEMA).
CWPOR_COLUMNS = [
    "model",
    "judge_model",
    "protocol",
    "verbosity",
    "question_id",
    "category",
    "type",
    "question",
    "best_answer",
    "falsehood",
    "correct_position",
    "answer_a",
    "answer_b",
    "neutral_truncated",
    "persuasive_truncated",
    "raw_judgment",
    "rationale",
    "choice",
    "rubric_confidence",
    "parse_ok",
    "parse_error",
    "p_a",
    "p_b",
    "llc",
    "llc_choice",
    "override",
    "llc_override",
    "combined_confidence",
]

# Argument fields of a selected ER-Audit transcript (transcripts.ARGUMENT_STRUCT).
ARGUMENT_FIELDS = ["round", "debater", "defends_true", "text", "truncated", "quotes", "verified_quotes"]
TRANSCRIPT_FIELDS = [
    "mode",
    "status",
    "reason",
    "candidate",
    "true_position",
    "p_monitored_true",
    "p_hidden_true",
    "p_hidden_false",
    "leak_score",
]
PAIR_FIELDS = ["story_title", "domain", "q_m", "y_true", "y_false", "q_h", "h_true", "h_false"]
STEP_FIELDS = [
    "generator",
    "t",
    "index",
    "delta",
    "non_degraded",
    "epsilon",
    "eta",
    "lower_bound",
    "lower_bound_betting",
    "n_degraded_draws",
]
PARAPHRASE_FIELDS = ["kind", "pool", "index", "question", "p_base", "p_target", "gain", "delta"]


@dataclass(frozen=True)
class AuditFiles:
    """The ER-Audit outputs of one dataset that the browser reads."""

    pairs: str | Path  # data/<dataset>.parquet
    debates: Mapping[str, str | Path] = field(default_factory=dict)  # mode -> selected transcripts
    deltas: str | Path | None = None  # results/er_audit/audit/<architecture>/<dataset>/<setting>/deltas.parquet
    records: str | Path | None = None
    steps: str | Path | None = None
    generators: str | Path | None = None


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (JSON has neither), nested values recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _with_columns(frame: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """`frame` with exactly `names`, a missing one as a null column (read by name, extras ignored)."""
    missing = [pl.lit(None).alias(n) for n in names if n not in frame.columns]
    return frame.with_columns(missing).select(names) if missing else frame.select(names)


def _read(path: str | Path | None) -> pl.DataFrame | None:
    if path is None or not Path(path).exists():
        return None
    return pl.read_parquet(path)


def cwpor_table(
    questions: str | Path, responses: Sequence[str | Path], judgments: Sequence[str | Path]
) -> pl.DataFrame:
    """One row per judgment (of every judge and protocol) with its question, both answers as the judge saw
    them (A/B; a rebuttal debate's two rounds under each letter) and the judge's reply: the judged debates
    (cwpor/judged.py) in the columns the page shows."""
    return judged_debates(questions, responses, judgments).select(CWPOR_COLUMNS)


def _transcripts(files: AuditFiles) -> dict[int, list[dict[str, Any]]]:
    by_pair: dict[int, list[dict[str, Any]]] = {}
    for mode, path in sorted(files.debates.items()):
        frame = _read(path)
        if frame is None:
            continue
        frame = frame.with_columns(pl.lit(mode).alias("mode")) if "mode" not in frame.columns else frame
        frame = _with_columns(frame, ["pair_id", *TRANSCRIPT_FIELDS, "arguments"])
        for row in frame.iter_rows(named=True):
            arguments = [{k: a.get(k) for k in ARGUMENT_FIELDS} for a in (row.pop("arguments") or [])]
            by_pair.setdefault(row.pop("pair_id"), []).append({**row, "arguments": arguments})
    return by_pair


def _grouped(frame: pl.DataFrame | None, keys: Sequence[str], fields: Sequence[str]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    if frame is None:
        return out
    frame = _with_columns(frame, list(dict.fromkeys([*keys, *fields])))
    for row in frame.iter_rows(named=True):
        out.setdefault(tuple(row[k] for k in keys), []).append({f: row[f] for f in fields})
    return out


def eraudit_dataset(dataset: str, files: AuditFiles) -> dict[str, Any]:
    """Per hidden question of `dataset`: its pair, the selected transcripts and, per verifier, the audit."""
    pairs = pl.read_parquet(files.pairs)
    records = _read(files.records)
    if records is None or records.is_empty():
        return {"dataset": dataset, "targets": [], "pairs": []}
    targets = list(dict.fromkeys(records["target"].to_list()))
    audited = sorted(set(records["pair_id"].to_list()))
    transcripts = _transcripts(files)
    deltas = _read(files.deltas)
    if deltas is not None:
        deltas = deltas.sort("pair_id", "kind", "pool", "index", nulls_last=False)
    paraphrases = _grouped(deltas, ["target", "pair_id"], PARAPHRASE_FIELDS)
    steps_frame = _read(files.steps)
    steps = _grouped(
        steps_frame.sort("generator", "t") if steps_frame is not None else None, ["target", "pair_id"], STEP_FIELDS
    )
    gen_frame = _read(files.generators)
    generators = _grouped(
        gen_frame,
        ["target", "pair_id"],
        [c for c in (gen_frame.columns if gen_frame is not None else []) if c not in ("dataset", "target", "pair_id")],
    )
    record_rows = {(r["target"], r["pair_id"]): r for r in records.iter_rows(named=True)}
    pair_rows = {r["pair_id"]: r for r in _with_columns(pairs, ["pair_id", *PAIR_FIELDS]).iter_rows(named=True)}
    out_pairs = []
    for pair_id in audited:
        pair = pair_rows.get(pair_id, {"pair_id": pair_id})
        audits = {}
        for target in targets:
            record = record_rows.get((target, pair_id))
            if record is None:
                continue
            audits[target] = {
                "record": {k: v for k, v in record.items() if k not in ("dataset", "target", "pair_id")},
                "paraphrases": paraphrases.get((target, pair_id), []),
                "steps": steps.get((target, pair_id), []),
                "generators": generators.get((target, pair_id), []),
            }
        out_pairs.append({**pair, "transcripts": transcripts.get(pair_id, []), "audits": audits})
    return {"dataset": dataset, "targets": targets, "pairs": out_pairs}


def build_payload(
    *,
    questions: str | Path | None,
    responses: Sequence[str | Path],
    judgments: Sequence[str | Path],
    eraudit: Mapping[str, AuditFiles | Mapping[str, Any]],
    headline: str = "paper",
) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-ready data; `headline`: the audit bound the page leads with
    (config `audit.headline_bound`)."""
    if headline not in BOUNDS:
        raise ValueError(f"audit.headline_bound: {headline!r} is not one of {list(BOUNDS)}")
    table = cwpor_table(questions, responses, judgments) if questions else None
    cwpor = {"columns": CWPOR_COLUMNS, "rows": [] if table is None else [list(r) for r in table.iter_rows()]}
    datasets = []
    for dataset, files in eraudit.items():
        files = files if isinstance(files, AuditFiles) else AuditFiles(**files)
        datasets.append(eraudit_dataset(dataset, files))
    return _clean({"version": PAYLOAD_VERSION, "headline": headline, "cwpor": cwpor, "eraudit": datasets})


def encode_payload(payload: dict[str, Any]) -> str:
    """gzip + base64 of the JSON: compact, and free of '<', so the page's script element cannot be closed."""
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    # mtime=0: the same results give the same page, byte for byte.
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def decode_payload(text: str) -> dict[str, Any]:
    return json.loads(gzip.decompress(base64.b64decode(text)))


def page_template() -> str:
    return resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")


def script_hash(html: str) -> str:
    """CSP source of the page's one executable script (the last <script> element, exactly as written)."""
    start = html.rindex("<script>") + len("<script>")
    body = html[start : html.index("</script>", start)]
    return "sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()


def render_page(payload: dict[str, Any]) -> str:
    template = page_template()
    for mark in (PAYLOAD_MARK, HASH_MARK):
        if template.count(mark) != 1:
            raise ValueError(f"page template must hold {mark} exactly once")
    template = template.replace(HASH_MARK, script_hash(template))
    return template.replace(PAYLOAD_MARK, encode_payload(payload))


def payload_from_page(html: str) -> dict[str, Any]:
    """The data embedded in a written page (for checks and for anyone who wants it back as JSON)."""
    start = html.index('id="payload"')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return decode_payload(body.strip())


def write_browser(
    out: str | Path,
    *,
    questions: str | Path | None,
    responses: Sequence[str | Path],
    judgments: Sequence[str | Path],
    eraudit: Mapping[str, AuditFiles | Mapping[str, Any]],
    headline: str = "paper",
) -> dict[str, Any]:
    """Write the browser page to `out`; returns the embedded payload."""
    payload = build_payload(
        questions=questions, responses=responses, judgments=judgments, eraudit=eraudit, headline=headline
    )
    html = render_page(payload)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(html, encoding="utf-8")
    n_pairs = sum(len(d["pairs"]) for d in payload["eraudit"])
    log.info(
        "browser page %s: %d CW-POR judgments, %d ER-Audit hidden questions over %d dataset(s), %.1f MB",
        out,
        len(payload["cwpor"]["rows"]),
        n_pairs,
        len(payload["eraudit"]),
        len(html) / 1e6,
    )
    return payload
