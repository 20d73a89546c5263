"""The device check (benchmarks/gpu_device_check.py, tools/device_check.py) at toy shapes on the CPU: every part it
runs on a GPU node runs here too, as a bare GPU machine runs it, so the script cannot rot before a GPU is lent."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from debate_audit.tools.device_check import PARTS, main

REPO = Path(__file__).resolve().parents[1]
# What a lent GPU machine lacks (its image holds torch and transformers, not the workflow's packages), made
# unimportable in every process of the check, its parts' processes too. `kernels` stays: transformers 5.25
# requires it (from_pretrained kernelizes by default), though the machine's older transformers goes without.
NOT_ON_A_BARE_MACHINE = ("polars", "pyarrow", "snakemake", "datasets", "gguf", "jsonschema", "openai")


def bare_machine_env(tmp_path: Path) -> dict:
    """The environment of a python3 without NOT_ON_A_BARE_MACHINE (a sitecustomize on PYTHONPATH marks them
    missing at every interpreter's start) and with an empty hub cache, offline."""
    site = tmp_path / "bare-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import sys\n\nsys.modules.update(dict.fromkeys({NOT_ON_A_BARE_MACHINE!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(site), "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow
def test_every_part_passes_at_toy_shapes_without_a_prepared_model_or_the_workflows_packages(tmp_path):
    env = bare_machine_env(tmp_path)
    blocked = subprocess.run([sys.executable, "-c", "import polars"], env=env, capture_output=True, text=True)
    assert blocked.returncode != 0 and "polars" in blocked.stderr  # the stand-in for the bare machine holds
    workdir = tmp_path / "checkout-without-resources"  # no resources/models/ beside it, nothing cached
    workdir.mkdir()
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_device_check.py"), "--shape", "tiny", "--device", "cpu"]
    run = subprocess.run(
        [*command, "--out", str(tmp_path / "out")], cwd=workdir, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    *lines, summary = run.stdout.splitlines()  # one JSON line a part, then the count
    parts = {line["part"]: line for line in map(json.loads, lines)}
    assert list(parts) == list(PARTS) and all(line["ok"] for line in parts.values()), run.stdout
    assert summary == f"{len(PARTS)} of {len(PARTS)} parts passed"
    assert [json.loads(line) for line in (tmp_path / "out" / "device_check.jsonl").read_text().splitlines()] == [
        parts[name] for name in PARTS
    ]
    assert all(line["seconds"] <= line["budget_s"] for line in parts.values())
    assert "kernels" in parts["environment"]["versions"] and parts["environment"]["hub"].startswith("unreachable")
    assert parts["smoke"]["model"] == "random" and parts["smoke"]["batch_invariance_gap"] == 0.0  # exact on a CPU
    assert parts["smoke"]["generations_equal_batched_and_alone"] == "2/2"
    fsdp = parts["fsdp"]
    assert fsdp["saved_weight_equal"] and len(fsdp["losses"]) == 2
    assert 0.75 <= fsdp["peak_over_plan"] <= 1.0 and set(fsdp["planned_terms_gib"]) >= {"shards", "root", "layers"}
    gpt_oss = parts["gpt-oss"]
    assert all(norm > 0 for norm in gpt_oss["expert_grad_norms"]) and gpt_oss["cache_namespace_marks_dequantized"]
    assert parts["qwen3.5"]["class"] == "Qwen3_5ForCausalLM" and parts["qwen3.5"]["weight_equal_to_saved"]
    assert parts["mfu"]["tokens_per_s"] > 0 and parts["mfu"]["mfu"] is None  # no bf16 peak for a CPU


def test_a_failing_part_fails_the_check_names_it_and_the_others_still_run(tmp_path, capsys):
    code = main(
        [
            "--shape",
            "tiny",
            "--device",
            "cpu",
            "--model-dir",
            str(tmp_path / "absent"),
            "--out",
            str(tmp_path),
            "--parts",
            "smoke",
            "qwen3.5",
        ]
    )
    assert code == 1
    parts = {line["part"]: line for line in map(json.loads, (tmp_path / "device_check.jsonl").read_text().splitlines())}
    assert not parts["smoke"]["ok"] and "absent" in parts["smoke"]["error"] and parts["qwen3.5"]["ok"]
    assert "failed: smoke" in capsys.readouterr().out


def test_a_part_over_its_budget_is_killed_reported_as_timed_out_and_the_next_still_runs(tmp_path, capsys):
    # 0.1 s: less than its process takes to import torch
    argv = ["--shape", "tiny", "--device", "cpu", "--parts", "smoke", "environment", "--budget", "smoke=0.1"]
    code = main([*argv, "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 1
    smoke, environment = map(json.loads, printed.splitlines()[:2])
    assert smoke["part"] == "smoke" and not smoke["ok"] and smoke["timed_out"] and smoke["budget_s"] == 0.1
    assert "budget of 0.1 s" in smoke["error"] and smoke["seconds"] < 10
    assert environment["part"] == "environment" and environment["ok"] and environment["budget_s"] == 60
    assert printed.splitlines()[2] == "1 of 2 parts passed; failed: smoke"


def test_a_budget_names_a_part_and_its_seconds():
    with pytest.raises(SystemExit, match="PART=SECONDS"):
        main(["--device", "cpu", "--budget", "smok=10"])
