"""What a configuration asks of its models, counted before anything runs (`make plan`, the job sizes): the
datasets' sizes and mean text lengths, each stage's calls and tokens per rule (its `cost.py`), and the jobs
per rule of a from-scratch run (Snakemake's own dry run)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debate_audit.models.calls import RulePlan

# Nominal sizes when a dataset is not on local disk (the releases' counts; mean words measured on the
# copies in ../shared/data).
NOMINAL = {
    "truthfulqa": {"n": 817, "question_words": 11.0, "answer_words": 9.0},
    "quality_h": {"n": 222, "question_words": 14.0, "context_words": 4700.0},
    "gpqa_h": {"n": 101, "question_words": 40.0, "context_words": 230.0},
}


def dry_run_jobs(configfiles: Sequence[str], workdir: str | Path = ".", targets: Sequence[str] = ()) -> dict[str, int]:
    """Jobs per rule of a from-scratch run, from `snakemake -n` (`--forceall`: what a new cluster runs); of
    the jobs `targets` need, where given (the audit command's), else of the whole run."""
    snakemake = Path(sys.executable).parent / "snakemake"
    cmd = [str(snakemake), *targets, "-n", "--forceall", "--quiet", "rules", "--configfile", *configfiles]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    jobs = {}
    for line in result.stdout.splitlines():
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if match and match.group(1) not in ("total", "job"):
            jobs[match.group(1)] = int(match.group(2))
    return jobs


def _words(text: Any) -> int:
    return len(str(text or "").split())


def dataset_stats(config: dict, shared: Path | None) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Item counts and mean words per dataset, from the configured files when local, else the copies in
    `shared`, else NOMINAL."""
    from debate_audit.data.pairs import load_pairs, load_quality_stories
    from debate_audit.data.truthfulqa import records_from_csv

    def local(location: str | None, shared_rel: str) -> str | None:
        if location and "://" not in location and Path(location).exists():
            return location
        if shared is not None and (shared / shared_rel).exists():
            return str(shared / shared_rel)
        return None

    stats: dict[str, dict[str, float]] = {}
    notes = []
    ds = config["datasets"]
    # With hf_id set the run reads the hub dataset (the same 817 questions as the CSV release).
    tqa_path = None if ds["truthfulqa"].get("hf_id") else ds["truthfulqa"].get("path")
    tqa = local(tqa_path, "truthfulqa/TruthfulQA.csv")
    if tqa:
        records = [r for r in records_from_csv(tqa)[0] if r is not None]
        stats["truthfulqa"] = {
            "n": len(records),
            "question_words": sum(_words(r.get("question")) for r in records) / len(records),
            "answer_words": sum(_words(r.get("best_answer")) for r in records) / len(records),
        }
        notes.append(f"truthfulqa: {len(records)} questions from {tqa}")
    for name, ctx_key, shared_pairs, shared_ctx in (
        ("quality_h", "stories", "quality_h/QuALITY-H-pairs.json", "quality_h/QuALITY-H-stories-partial.jsonl.gz"),
        ("gpqa_h", "contexts", "gpqa_h/GPQA-H-pairs.json.gz", "gpqa_h/GPQA-H-title-story.json.gz"),
    ):
        pairs_at = local(ds[name].get("pairs"), shared_pairs)
        ctx_at = local(ds[name].get(ctx_key), shared_ctx)
        if not pairs_at:
            continue
        pairs = [pair for pair in load_pairs(pairs_at)[0] if pair is not None]
        entry = {"n": len(pairs), "question_words": sum(_words(p.get("q_m")) for p in pairs) / len(pairs)}
        if ctx_at and name == "quality_h":
            stories = load_quality_stories(ctx_at, {p["story_title"] for p in pairs})[0]  # the stories the run reads
            entry["context_words"] = sum(map(_words, stories.values())) / max(1, len(stories))
        elif ctx_at:
            from debate_audit.data.io import read_json

            contexts = read_json(ctx_at)
            values = list(contexts.values()) if isinstance(contexts, dict) else contexts
            entry["context_words"] = sum(map(_words, values)) / max(1, len(values))
        stats[name] = entry
        notes.append(f"{name}: {len(pairs)} pairs from {pairs_at}")
    # your own datasets (datasets.own): counted from their files, read by the real loader's row checks
    from debate_audit.data.own_pairs import check_row, read_rows

    for name, entry in (ds.get("own") or {}).items():
        at = entry["pairs"] if "://" not in entry["pairs"] and Path(entry["pairs"]).is_file() else None
        if not at:
            stats[name] = {"n": 0.0, "question_words": 0.0}
            notes.append(f"{name}: {entry['pairs']} is not on local disk; its pairs are not counted")
            continue
        rows = [r for r, _ in (check_row(item) for item, why in read_rows(at) if why is None) if r is not None]
        stats[name] = {
            "n": len(rows),
            "question_words": sum(_words(r["q_m"]) for r in rows) / max(1, len(rows)),
            "context_words": sum(_words(r["context"]) for r in rows) / max(1, len(rows)),
        }
        notes.append(f"{name}: {len(rows)} pairs from {at}")
    for name, nominal in NOMINAL.items():
        merged = {**nominal, **stats.get(name, {})}
        if name not in stats:
            notes.append(f"{name}: not on local disk; nominal size {nominal['n']} items")
        stats[name] = merged
    return stats, notes


def model_calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    """Calls and tokens per model-bound rule (whole run, all jobs of the rule together), as each stage
    counts them (its `cost.py`)."""
    from debate_audit.cwpor import cost as cwpor_cost
    from debate_audit.eraudit.audit import cost as audit_cost
    from debate_audit.eraudit.debate import cost as debate_cost
    from debate_audit.eraudit.paraphrase import cost as paraphrase_cost
    from debate_audit.eraudit.verifier import cost as verifier_cost

    return [
        *cwpor_cost.calls(config, stats),
        *debate_cost.calls(config, stats),
        *verifier_cost.calls(config, stats),
        *paraphrase_cost.calls(config, stats),
        *audit_cost.calls(config, stats),
    ]
