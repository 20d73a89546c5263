"""code_fingerprint: a rule's params change exactly when a library module its script reaches changes."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from debate_audit.runtime import provenance
from debate_audit.runtime.provenance import code_fingerprint, library_files

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def library(tmp_path):
    root = tmp_path / "debate_audit"
    shutil.copytree(provenance.ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
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
    module = root / "eraudit" / "debate" / "debates.py"
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
    files = {str(p.relative_to(root)) for p in library_files(root / "eraudit" / "debate" / "selection.py", root)}
    assert {
        "eraudit/common/readout.py",
        "eraudit/debate/leaks.py",
        "eraudit/debate/debates.py",
        "models/lm.py",
    } <= files


def _every_import(tree) -> set[tuple]:
    found: set[tuple] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(("import", alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(("from", node.level, node.module, alias.name) for alias in node.names)
    return found


def test_the_import_scan_reads_every_import_the_parser_does_in_the_library_and_the_scripts():
    files = sorted(provenance.ROOT.rglob("*.py")) + sorted((REPO / "workflow" / "scripts").glob("*.py"))
    assert len(files) > 100
    for file in files:
        source = file.read_text()
        assert _every_import(provenance._import_statements(source, str(file))) == _every_import(ast.parse(source)), file


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # after a compound statement's colon, after a semicolon, indented in a function
        ("if TYPE_CHECKING: from .a import b\n", {("from", 1, "a", "b")}),
        ("x = 1; import debate_audit.c as c\n", {("import", "debate_audit.c")}),
        (
            "def f():\n    from ..d import (\n        e,  # the first\n        f,\n    )\n",
            {("from", 2, "d", "e"), ("from", 2, "d", "f")},
        ),
        # backslash continuations, inside the module's name too
        ("from \\\n    debate_audit.g import \\\n    h\n", {("from", 0, "debate_audit.g", "h")}),
        ("from .import i\n", {("from", 1, None, "i")}),
        # a comment holding ')' in the parentheses: the scan's statement does not parse, the whole module is read
        ("from .j import (k,  # (sic)\n l)\n", {("from", 1, "j", "k"), ("from", 1, "j", "l")}),
        # prose after a colon that reads like an import, in a string: the whole module is read
        ('x = "note: from the import"\nimport debate_audit.m\n', {("import", "debate_audit.m")}),
    ],
)
def test_the_import_scan_on_the_forms_an_import_takes(source, expected):
    assert _every_import(provenance._import_statements(source, "<case>")) == expected


def test_a_string_line_that_reads_as_an_import_counts_as_one():
    """The scan's one difference from the parser: over-inclusion (a fingerprint with one file too many reruns too
    much, never too little)."""
    source = 'HELP = """\nfrom debate_audit.n import o\n"""\n'
    assert _every_import(provenance._import_statements(source, "<case>")) == {("from", 0, "debate_audit.n", "o")}


# ------------------------------------------------------------------ run provenance in outputs
def write_one(path):
    import polars as pl

    from debate_audit.data.io import write_parquet

    write_parquet(pl.DataFrame({"x": [1]}), {"x": pl.Int64}, path)


def test_parquet_output_records_the_rule_its_params_and_the_models_it_read(tmp_path):
    from debate_audit.runtime.provenance import read_provenance, record_model, rule_provenance

    params = {
        "seed": 3,
        "model": {"name": "m", "directory": str(tmp_path)},
        "pick": lambda wc: 1,
        "out_dir": tmp_path / "x",
    }
    with rule_provenance("cwpor_judge", params, {"model": "m", "verbosity": "50"}):
        record_model("m", tmp_path, {"weights_sha256": "ab" * 32, "name": "m"})
        record_model("m", tmp_path, {"weights_sha256": "ab" * 32})  # opened twice, listed once
        write_one(tmp_path / "out.parquet")
    found = read_provenance(tmp_path / "out.parquet")
    assert found["rule"] == "cwpor_judge"
    assert found["wildcards"] == {"model": "m", "verbosity": "50"}
    assert found["params"] == {
        "seed": 3,
        "model": {"name": "m", "directory": str(tmp_path)},
        "out_dir": str(tmp_path / "x"),
    }  # the callable is left out
    assert found["models"] == [{"name": "m", "directory": str(tmp_path), "weights_sha256": "ab" * 32}]
    version = found["version"]
    assert version["package"] and ("commit" not in version or len(version["commit"]) == 40)
    # what it ran on: the versions that move numbers, the CPU, the GPUs (none here without nvidia-smi)
    from importlib import metadata

    software = found["software"]
    assert software["packages"]["torch"] == metadata.version("torch")
    assert software["packages"]["transformers"] == metadata.version("transformers")
    assert {"polars", "snakemake"} <= set(software["packages"]) and software["python"].count(".") == 2
    assert software["cpu"] and isinstance(software["gpus"], list)


def test_outside_a_rule_an_output_records_the_version_only(tmp_path):
    from debate_audit.runtime.provenance import read_provenance, record_model

    record_model("m", tmp_path, {"weights_sha256": "cd" * 32})  # no rule: nothing to add it to
    write_one(tmp_path / "out.parquet")
    found = read_provenance(tmp_path / "out.parquet")
    assert set(found) == {"format", "version"}


def test_no_api_key_value_reaches_an_output(tmp_path, monkeypatch):
    from debate_audit.runtime.provenance import read_provenance, rule_provenance

    monkeypatch.setenv("SERVER_CREDS", "sk-live-0123456789abcdef")
    monkeypatch.setenv("OTHER_API_KEY", "sk-other-0123456789abcdef")
    # A key pasted where a name belongs, and one embedded in a URL: both are replaced by the variable's name.
    params = {
        "judge": {"api_key_env": "SERVER_CREDS", "base_url": "http://h/v1?key=sk-other-0123456789abcdef"},
        "note": "sk-live-0123456789abcdef",
    }
    with rule_provenance("r", params):
        write_one(tmp_path / "out.parquet")
    raw = (tmp_path / "out.parquet").read_bytes()
    assert b"sk-live" not in raw and b"sk-other" not in raw
    found = read_provenance(tmp_path / "out.parquet")["params"]
    assert found["judge"]["api_key_env"] == "SERVER_CREDS"
    assert found["note"] == "<value of $SERVER_CREDS>"
    assert found["judge"]["base_url"] == "http://h/v1?key=<value of $OTHER_API_KEY>"


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_figures_carry_the_provenance(tmp_path, suffix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from debate_audit.runtime.provenance import read_provenance, rule_provenance, save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    with rule_provenance("audit_figures", {"figures_version": "v1"}):
        save_figure(fig, tmp_path / f"f.{suffix}")
    plt.close(fig)
    found = read_provenance(tmp_path / f"f.{suffix}")
    assert found["rule"] == "audit_figures" and found["params"] == {"figures_version": "v1"}


def test_a_file_without_provenance_reads_as_none(tmp_path):
    import polars as pl

    from debate_audit.runtime.provenance import read_provenance

    pl.DataFrame({"x": [1]}).write_parquet(tmp_path / "plain.parquet")
    assert read_provenance(tmp_path / "plain.parquet") is None
