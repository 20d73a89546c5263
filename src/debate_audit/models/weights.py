"""The one way a prepared model's weights are read into a torch module in-process: scoring and generation
(lm.py), LoRA adapters (adapter.py), fine-tuning (eraudit/verifier/finetune.py) and the paraphrase embedder.

    model = load_pretrained(directory, dtype=torch.bfloat16)

Two guarantees over a bare `from_pretrained`:

- **Nothing silent.** A weight the class expects and the files lack (it would keep its random
  initialisation), a tensor the files hold that nothing reads, a shape that differs: the load fails, naming
  the keys. What transformers itself drops by design (the class's `_keys_to_ignore_on_load_unexpected`:
  Qwen3.5's vision tower and MTP head when its composite checkpoint is read as the causal LM) is not an error.
- **Offline and trainable, whatever the quantization.** gpt-oss ships its experts in MXFP4. With the
  `kernels` package installed and Triton >= 3.4 (any CUDA node), transformers keeps them packed and
  downloads `kernels-community/gpt-oss-triton-kernels` from the hub to run them (integrations/mxfp4.py,
  `replace_with_mxfp4_linear` -> `get_kernel`), which fails with HF_HUB_OFFLINE=1; and packed experts are not
  trainable (the quantizer's `is_trainable` is False). Here an MXFP4 checkpoint is always dequantized while it
  loads (`Mxfp4Config(dequantize=True)`, transformers' own path: no kernel, no download), to the dtype asked
  for: bf16 for inference on a GPU, fp32 master weights for fine-tuning. `weights_form` names this for the
  call cache's namespace (the dequantized experts compute other numbers than the packed kernel would).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MXFP4_DEQUANTIZED = "mxfp4-dequantized"


def quantization(directory: str | Path) -> str | None:
    """The quant_method of the checkpoint in `directory` (config.json), or None."""
    config_file = Path(directory) / "config.json"
    if not config_file.exists():
        return None
    config = json.loads(config_file.read_text())
    method = (config.get("quantization_config") or {}).get("quant_method")
    return None if method is None else str(method)


def weights_form(directory: str | Path) -> str | None:
    """How the loaded weights differ from the files' own numbers: MXFP4_DEQUANTIZED for an MXFP4 checkpoint
    (experts dequantized while loading), None for a plain one. Joins the call cache's namespace."""
    return MXFP4_DEQUANTIZED if quantization(directory) == "mxfp4" else None


class IncompleteWeightsError(RuntimeError):
    """The files of a model directory do not fill the model class exactly."""


def check_loading_info(directory: str | Path, info: dict[str, Any], what: str = "model") -> None:
    """Fail, naming the keys, when transformers' loading info reports missing, unexpected or mismatched
    weights or an error message."""
    problems = []
    for key, label in (
        ("missing_keys", "missing (they would keep their random initialisation)"),
        ("unexpected_keys", "unexpected (in the files, read by nothing)"),
        ("mismatched_keys", "of another shape than the class's"),
    ):
        keys = sorted(str(k) for k in info.get(key) or ())
        if keys:
            shown = ", ".join(keys[:20]) + (f" and {len(keys) - 20} more" if len(keys) > 20 else "")
            problems.append(f"{len(keys)} weight(s) {label}: {shown}")
    problems += [str(m) for m in info.get("error_msgs") or ()]
    if problems:
        raise IncompleteWeightsError(f"{directory}: loading the {what} failed: " + "; ".join(problems))


def load_pretrained(directory: str | Path, *, dtype: Any, model_class: Any = None, **kwargs: Any) -> Any:
    """`model_class.from_pretrained(directory)` (default AutoModelForCausalLM) from safetensors, in `dtype`,
    with MXFP4 experts dequantized to it and every weight accounted for (IncompleteWeightsError otherwise).
    `kwargs` go to from_pretrained (attn_implementation, ...)."""
    from transformers import AutoModelForCausalLM

    model_class = model_class or AutoModelForCausalLM
    if quantization(directory) == "mxfp4":
        from transformers import Mxfp4Config

        kwargs["quantization_config"] = Mxfp4Config(dequantize=True)
    model, info = model_class.from_pretrained(
        directory, dtype=dtype, use_safetensors=True, output_loading_info=True, **kwargs
    )
    check_loading_info(directory, info, type(model).__name__)
    return model


def load_adapter(base: Any, directory: str | Path) -> Any:
    """peft's PeftModel of `base` with the adapter in `directory`, every adapter weight accounted for (as
    PeftModel.from_pretrained, which only warns on a missing key and not on an unexpected one)."""
    from peft import MODEL_TYPE_TO_PEFT_MODEL_MAPPING, PeftConfig, PeftModel

    # what PeftModel.from_pretrained does, keeping load_adapter's result
    config = PeftConfig.from_pretrained(directory)
    config.inference_mode = True
    model = MODEL_TYPE_TO_PEFT_MODEL_MAPPING.get(config.task_type, PeftModel)(base, config)
    result = model.load_adapter(str(directory), adapter_name="default")
    check_loading_info(
        directory,
        {"missing_keys": result.missing_keys, "unexpected_keys": result.unexpected_keys},
        "LoRA adapter",
    )
    return model
