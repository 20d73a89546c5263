"""What runs Qwen3.5's linear-attention layers (models/linear_kernels.py: the `gpu` extra's kernels or
transformers' torch fallback) joins the call cache's namespace and the provenance, decided as transformers
decides it; every other model's namespace and provenance stay as they were.

The kernels need a CUDA GPU, so where they are "installed" here it is as stand-in packages that only define
the functions transformers looks up, and "on a GPU" is a LanguageModel that never loads its weights."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from debate_audit.models import linear_kernels
from debate_audit.models.decoding import NUMERICS_VERSION
from debate_audit.models.linear_kernels import PACKAGES, linear_attention
from debate_audit.models.loading import ModelRef, open_model
from debate_audit.models.prepare import read_fingerprint, write_fingerprint
from debate_audit.runtime.provenance import record_model, rule_provenance
from debate_audit.tools.tiny_checkpoints import tiny_qwen3_5_config, tiny_tokenizer, write_qwen3_5_composite

TORCH_BOTH = {"delta_rule": "torch", "conv1d": "torch"}


@pytest.fixture()
def qwen_dir(tmp_path: Path) -> Path:
    """A composite Qwen3.5 checkpoint at a tiny shape (three linear-attention layers, one full), prepared as
    prepare_model leaves a model: tokenizer files and fingerprint.json beside the weights."""
    directory = tmp_path / "qwen3.5"
    write_qwen3_5_composite(directory, tiny_qwen3_5_config())
    tiny_tokenizer().save_pretrained(directory)
    write_fingerprint(directory, name="tiny-qwen3.5")
    return directory


@pytest.fixture()
def llama_dir(tmp_path: Path) -> Path:
    from helpers import tiny_llama

    directory = tmp_path / "llama"
    tokenizer = tiny_tokenizer()
    tiny_llama(vocab_size=len(tokenizer)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_fingerprint(directory, name="tiny-llama")
    return directory


@pytest.fixture()
def kernels_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-ins for flash-linear-attention and causal-conv1d on sys.path: packages defining, where
    transformers looks, the functions it takes from them (computing nothing). Transformers' Qwen3.5 module is
    imported first, so it stays bound to its torch functions."""
    import transformers.models.qwen3_5.modeling_qwen3_5  # noqa: F401

    root = tmp_path / "site"
    (root / "fla/ops/gated_delta_rule").mkdir(parents=True)
    (root / "fla/__init__.py").write_text('__version__ = "9.9.9"\n')
    (root / "fla/ops/__init__.py").write_text("")
    (root / "fla/ops/gated_delta_rule/__init__.py").write_text(
        "def chunk_gated_delta_rule(): ...\ndef fused_recurrent_gated_delta_rule(): ...\n"
    )
    (root / "causal_conv1d").mkdir()
    (root / "causal_conv1d/__init__.py").write_text(
        '__version__ = "8.8.8"\ndef causal_conv1d_fn(): ...\ndef causal_conv1d_update(): ...\n'
    )
    monkeypatch.syspath_prepend(str(root))
    linear_kernels.found.cache_clear()
    yield root
    linear_kernels.found.cache_clear()
    for name in [m for m in sys.modules if m.split(".")[0] in ("fla", "causal_conv1d")]:
        del sys.modules[name]


def on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """LanguageModel(device="cuda") on this CPU machine: the device taken as given. With a generation backend
    and no scoring, it never loads the weights, which is all a namespace needs."""
    import debate_audit.models.lm as lm_module

    monkeypatch.setattr(lm_module, "resolve_device", lambda device, name=None: device)


def gpu_model(directory: Path):
    from debate_audit.models.lm import LanguageModel

    return LanguageModel(directory, device="cuda", dtype="float32", cache=None, generation_backend=object())


def test_on_a_cpu_a_qwen3_5_model_runs_the_torch_fallback_and_says_so(qwen_dir):
    ref = ModelRef("qwen3.5-9b", str(qwen_dir), device="cpu", dtype="float32")
    with rule_provenance("verifier_evaluate") as record, open_model(ref) as lm:
        assert lm.linear_attention.record() == TORCH_BOTH
        fingerprint = read_fingerprint(qwen_dir)["weights_sha256"]
        assert lm.cache_namespace == f"{fingerprint}-numerics{NUMERICS_VERSION}-linear_attention-torch-torch"
    (entry,) = record["models"]
    assert entry["linear_attention"] == [TORCH_BOTH]


def test_the_kernels_and_the_torch_fallback_keep_their_scores_apart(qwen_dir, kernels_installed, monkeypatch, caplog):
    from debate_audit.models.lm import LanguageModel

    # on a CPU the packages do not run, whatever is installed: transformers' torch functions, the same namespace
    cpu = LanguageModel(qwen_dir, device="cpu", dtype="float32", cache=None, generation_backend=object())
    assert cpu.linear_attention.record() == TORCH_BOTH
    on_a_gpu(monkeypatch)
    gpu = gpu_model(qwen_dir)
    assert gpu.linear_attention.record() == {
        "delta_rule": "flash-linear-attention 9.9.9",
        "conv1d": "causal-conv1d 8.8.8",
    }
    assert gpu.cache_namespace.endswith("-linear_attention-fla-causal_conv1d")
    assert gpu.cache_namespace != cpu.cache_namespace
    assert (
        gpu.cache_namespace.rsplit("-linear_attention", 1)[0] == cpu.cache_namespace.rsplit("-linear_attention", 1)[0]
    )
    # flash-linear-attention alone (make install-gpu CAUSAL_CONV1D=no): a third namespace
    shutil.rmtree(kernels_installed / "causal_conv1d")
    del sys.modules["causal_conv1d"]
    linear_kernels.found.cache_clear()
    alone = gpu_model(qwen_dir)
    assert alone.linear_attention.record()["conv1d"] == "torch"
    assert alone.cache_namespace.endswith("-linear_attention-fla-torch")
    # and nothing installed on a GPU: the fallback, its namespace the CPU's
    shutil.rmtree(kernels_installed / "fla")
    for name in [m for m in sys.modules if m.split(".")[0] == "fla"]:
        del sys.modules[name]
    linear_kernels.found.cache_clear()
    with caplog.at_level("WARNING", logger="debate_audit.models.linear_kernels"):
        assert gpu_model(qwen_dir).cache_namespace == cpu.cache_namespace
    assert "torch fallback of the gated delta rule on cuda" in caplog.text and "make install-gpu" in caplog.text


def test_only_a_model_whose_layers_run_in_process_records_them(qwen_dir, monkeypatch):
    """A job whose calls all go to a vLLM engine (its own kernels) never loads the weights: nothing of
    transformers' layers ran, and its provenance says nothing of them."""
    on_a_gpu(monkeypatch)
    with rule_provenance("debate_generate") as record:
        record_model("qwen3.5-9b", str(qwen_dir), read_fingerprint(qwen_dir))
        gpu_model(qwen_dir)
    assert "linear_attention" not in record["models"][0]


def test_a_model_without_linear_attention_keeps_its_namespace_and_provenance(llama_dir, kernels_installed, monkeypatch):
    fingerprint = read_fingerprint(llama_dir)["weights_sha256"]
    ref = ModelRef("tiny-llama", str(llama_dir), device="cpu", dtype="float32")
    with rule_provenance("cwpor_judge") as record, open_model(ref) as lm:
        assert lm.linear_attention is None
        assert lm.cache_namespace == f"{fingerprint}-numerics{NUMERICS_VERSION}"
    assert record["models"] == [{"name": "tiny-llama", "directory": str(llama_dir), "weights_sha256": fingerprint}]
    on_a_gpu(monkeypatch)  # kernels importable, a GPU: still nothing of them in a Llama's namespace
    assert gpu_model(llama_dir).cache_namespace == f"{fingerprint}-numerics{NUMERICS_VERSION}"


def test_a_config_json_is_read_as_the_loaded_config_is():
    from debate_audit.models.size import KNOWN_CONFIGS

    qwen = KNOWN_CONFIGS["Qwen/Qwen3.5-9B"]
    assert linear_attention(qwen, "cpu").record() == TORCH_BOTH
    assert linear_attention(tiny_qwen3_5_config(), "cpu").record() == TORCH_BOTH
    for other in ("meta-llama/Llama-3.1-8B-Instruct", "openai/gpt-oss-20b"):
        assert linear_attention(KNOWN_CONFIGS[other], "cuda") is None
    # a Qwen3.5 text config with no linear-attention layer has none to run
    full = {**qwen, "text_config": {**qwen["text_config"], "layer_types": ["full_attention"] * 32}}
    assert linear_attention(full, "cuda") is None


def test_transformers_takes_the_kernels_from_where_this_module_looks():
    """The tables of linear_kernels.py against transformers' own: which function it takes from which package
    for each gated-delta-net model, where in the package it looks, and on which devices it runs them. Fails
    when a transformers upgrade changes any of them."""
    import importlib
    import inspect

    from transformers.integrations import hub_kernels

    wanted = {(function, kernel.package) for kernel in PACKAGES for function in kernel.functions}
    for module in ("qwen3_5", "qwen3_5_moe", "qwen3_next"):
        source = inspect.getsource(importlib.import_module(f"transformers.models.{module}.modeling_{module}"))
        asked = set(re.findall(r'use_kernel_func_from_hub_with_fallback\("(\w+)", "(\w+)"\)', source))
        assert asked == wanted, module
        config = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
        types = {c.model_type for c in vars(config).values() if isinstance(c, type) and c.__module__ == config.__name__}
        assert types - {f"{module}_vision"} <= linear_kernels.GATED_DELTA_NET_TYPES, module
    assert hub_kernels._PACKAGE_TO_DISTRIBUTION["fla"] == "flash-linear-attention"
    for kernel in PACKAGES:
        assert hub_kernels._PACKAGE_SUPPORTED_DEVICES[kernel.package] == kernel.devices
        for function in kernel.functions:
            assert hub_kernels._KERNELS_INTERNAL_PATH_MAPPINGS.get(function) == kernel.internal, function
