"""code_fingerprint: a rule's params change exactly when a library module its script reaches changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from debate_audit import provenance
from debate_audit.provenance import code_fingerprint, library_files

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def library(tmp_path):
    root = tmp_path / "debate_audit"
    shutil.copytree(Path(provenance.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    scripts = tmp_path / "scripts"
    shutil.copytree(REPO / "workflow" / "scripts", scripts)
    return root, scripts


def fingerprints(root: Path, scripts: Path) -> dict[str, str]:
    code_fingerprint.cache_clear()
    return {s.stem: code_fingerprint(s, root) for s in sorted(scripts.glob("*.py"))}


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before if before[name] != after[name]}


def test_prompt_edit_in_the_er_debates_changes_only_the_scripts_that_reach_it(library):
    root, scripts = library
    before = fingerprints(root, scripts)
    module = root / "eraudit" / "transcripts.py"
    module.write_text(module.read_text().replace("You are Debater", "You are debater", 1))
    after = fingerprints(root, scripts)
    touched = changed(before, after)
    assert "debate_generate" in touched and "debate_select" in touched
    assert not touched & {"cwpor_debate", "cwpor_judge", "cwpor_metrics", "prepare_truthfulqa", "prepare_model"}


def test_judge_template_edit_changes_the_cwpor_scripts_only(library):
    root, scripts = library
    before = fingerprints(root, scripts)
    module = root / "cwpor" / "prompts.py"
    module.write_text(module.read_text() + "\n# edited\n")
    touched = changed(before, fingerprints(root, scripts))
    assert {"cwpor_debate", "cwpor_judge"} <= touched
    assert not touched & {"debate_generate", "verifier_finetune", "audit_statistics", "prepare_gpqa_h"}


def test_model_layer_edit_reaches_every_model_bound_script(library):
    root, scripts = library
    before = fingerprints(root, scripts)
    module = root / "models" / "lm.py"
    module.write_text(module.read_text() + "\n# edited\n")
    touched = changed(before, fingerprints(root, scripts))
    assert {"cwpor_judge", "debate_generate", "verifier_evaluate", "audit_scores", "paraphrase_pool"} <= touched
    assert not touched & {"cwpor_metrics", "cwpor_figures", "debate_split", "prepare_truthfulqa"}


def test_relative_imports_are_followed(library):
    root, _ = library
    files = {str(p.relative_to(root)) for p in library_files(root / "eraudit" / "selection.py", root)}
    assert {"eraudit/readout.py", "eraudit/leaks.py", "eraudit/transcripts.py", "models/lm.py"} <= files
