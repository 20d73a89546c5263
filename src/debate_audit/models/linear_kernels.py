"""Which implementation runs a Qwen3.5 model's linear-attention layers: the `gpu` extra's kernels
(flash-linear-attention's gated delta rule, causal-conv1d's convolution; `make install-gpu`) or transformers'
torch fallback. The two compute the same function in different orders and precisions (the fallback in fp32,
over 64-token chunks in a Python loop), so their scores differ in the last bits and their speed by a factor:
`LanguageModel` keeps each one's results in its own call-cache namespace and the provenance records which ran.

The decision is transformers' own, repeated here with its checks (transformers 5.25,
integrations/hub_kernels.py `use_kernel_func_from_hub_with_fallback`, which wraps each of these functions in
models/qwen3_5, qwen3_5_moe and qwen3_next): when the model module is imported it imports the package and looks
the function up at the top of the package or in its internal module, any error meaning the torch function;
at each call, inputs on a device type the package does not run on (a CPU) take the torch function.
tests/test_linear_kernels.py checks these tables against transformers'. Hub kernels (`kernelize`,
`use_kernels=True`) would replace both; nothing here asks for them.

Only the gated-delta-net family is covered (GATED_DELTA_NET_TYPES): every other model gets None, and its
namespace and provenance stay as they were.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

log = logging.getLogger(__name__)

TORCH = "torch"  # the implementation's name when transformers' torch function runs


@dataclass(frozen=True)
class KernelPackage:
    """One package transformers tries before its torch function, and the functions it takes from it."""

    op: str  # what the provenance calls the operation
    package: str  # import name
    distribution: str  # what pip installs (the `gpu` extra, constraints.txt)
    internal: str | None  # the module inside the package that defines the functions (_KERNELS_INTERNAL_PATH_MAPPINGS)
    functions: tuple[str, ...]
    devices: tuple[str, ...]  # device types its kernels run on (_PACKAGE_SUPPORTED_DEVICES)
    short: str  # its name in the call cache's namespace


PACKAGES = (
    KernelPackage(
        op="delta_rule",
        package="fla",
        distribution="flash-linear-attention",
        internal="ops.gated_delta_rule",
        functions=("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"),
        devices=("cuda", "xpu", "mlu", "npu"),
        short="fla",
    ),
    KernelPackage(
        op="conv1d",
        package="causal_conv1d",
        distribution="causal-conv1d",
        internal=None,
        functions=("causal_conv1d_fn", "causal_conv1d_update"),
        devices=("cuda",),
        short="causal_conv1d",
    ),
)

# Model types whose linear-attention layers are transformers' gated delta net with the PACKAGES above: the
# composite checkpoint's type and its text decoder's.
GATED_DELTA_NET_TYPES = frozenset({"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"})


def uses_gated_delta_net(config: Any) -> bool:
    """Whether a model (its transformers config, or its config.json as a dict) has gated-delta-net layers."""
    if isinstance(config, Mapping):
        text = config.get("text_config") or config
        types = {config.get("model_type"), text.get("model_type")}
        layer_types = text.get("layer_types") or []
    else:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        types = {getattr(config, "model_type", None), getattr(text, "model_type", None)}
        layer_types = getattr(text, "layer_types", None) or []
    # a config.json may leave layer_types to the class's default (every fourth layer full attention)
    return bool(types & GATED_DELTA_NET_TYPES) and (not layer_types or "linear_attention" in layer_types)


@functools.cache
def found(package: str, internal: str | None, function: str) -> bool:
    """Whether transformers finds `function` in `package`: at its top, else in its internal module; any error
    on the way (not installed, a kernel that fails to import) means it does not."""
    try:
        module = importlib.import_module(package)
        if getattr(module, function, None) is not None:
            return True
        if internal is None:
            return False
        return getattr(importlib.import_module(f"{package}.{internal}"), function, None) is not None
    except Exception:  # transformers' own rule: whatever fails, the torch function runs
        return False


def package_version(kernel: KernelPackage) -> str:
    """The installed version (the module's own `__version__`, else the distribution's), "unknown" if neither."""
    version = getattr(importlib.import_module(kernel.package), "__version__", None)
    if version is None:
        try:
            version = metadata.version(kernel.distribution)
        except metadata.PackageNotFoundError:
            version = "unknown"
    return f"{kernel.distribution} {version}"


def implementation(kernel: KernelPackage, device: str) -> str:
    """What runs `kernel`'s operation for inputs on `device`: "<distribution> <version>" where transformers takes
    all its functions from the package and the device type is one the package runs on, else TORCH. A package
    that has some of the functions only (no release does) is named with the ones it lacks."""
    if device.split(":")[0] not in kernel.devices:
        return TORCH
    have = [f for f in kernel.functions if found(kernel.package, kernel.internal, f)]
    if not have:
        return TORCH
    missing = [f for f in kernel.functions if f not in have]
    return package_version(kernel) + (f" (torch for {', '.join(missing)})" if missing else "")


@dataclass(frozen=True)
class LinearAttention:
    """The implementation of each operation of the linear-attention layers (PACKAGES' `op`: TORCH or the
    package and version that ran it)."""

    ops: tuple[tuple[str, str], ...]

    def record(self) -> dict[str, str]:
        """For the provenance: {"delta_rule": ..., "conv1d": ...}."""
        return dict(self.ops)

    def namespace(self) -> str:
        """For the call cache's namespace: which implementation of each operation, not its version (as the
        transformers version, which the provenance records, is not in the namespace either)."""
        names = []
        for kernel in PACKAGES:
            value = dict(self.ops)[kernel.op]
            names.append(TORCH if value == TORCH else kernel.short + ("_partial" if "(" in value else ""))
        return "linear_attention-" + "-".join(names)


def linear_attention(config: Any, device: str) -> LinearAttention | None:
    """What runs a model's linear-attention layers on `device` (a resolved device: "cuda", "cuda:1", "cpu"),
    None for a model without gated-delta-net layers."""
    if not uses_gated_delta_net(config):
        return None
    return LinearAttention(tuple((kernel.op, implementation(kernel, device)) for kernel in PACKAGES))


def warn_if_fallback_on_gpu(name: str, device: str, ran: LinearAttention | None) -> None:
    """Log where a GPU job runs a torch fallback the kernels would have replaced: slower than `make plan`
    priced it (cluster.linear_attention_kernels true), and scores kept apart from the kernels'."""
    delta_rule = PACKAGES[0]  # the costly one: the convolution's fallback is one torch call
    if ran is None or device.split(":")[0] not in delta_rule.devices or ran.record()[delta_rule.op] != TORCH:
        return
    log.warning(
        "%s: its linear-attention layers run transformers' torch fallback of the gated delta rule on %s (%s is "
        "not importable here: `make install-gpu`): slower than make plan prices with "
        "cluster.linear_attention_kernels true, and its scores are cached apart from the kernels'",
        name,
        device,
        delta_rule.distribution,
    )


def main() -> None:
    """`python -m debate_audit.models.linear_kernels` (`make install-gpu` ends with it): what a Qwen3.5 model's
    layers run on a CUDA GPU with this environment's packages; exit status 1 where the delta rule would run on
    torch. Checked where it runs: a package whose import needs a GPU reads as absent on a machine without one."""
    import sys

    for kernel in PACKAGES:
        print(f"{kernel.op}: {implementation(kernel, 'cuda')}")
    sys.exit(int(implementation(PACKAGES[0], "cuda") == TORCH))


if __name__ == "__main__":
    main()
