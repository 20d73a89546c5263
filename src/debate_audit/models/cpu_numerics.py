"""What batch invariance and run-to-run determinism on a CPU rest on, checked when a model is loaded.

Two properties of the processor's math libraries are not the same on every x86-64 CPU, so they are
measured at start-up instead of assumed:

- **Matrix products whose rows do not depend on the row count.** The batch-invariant path (decoding.py)
  needs a row of `x @ W.T` to come out the same bits whether it is multiplied alone, with 3 other rows or
  with 2,000 (a prompt's tokens land in products of every size, depending on what shares its batch). MKL's
  strict CNR mode (`MKL_CBWR=AUTO,STRICT`, set in `models/__init__.py`) gives that on Intel Xeons; on an AMD
  EPYC (AVX-512) products of 1 or 3 rows still differed from the same rows among 32, and other MKL code
  paths differ below 8, 16 or 56 rows or off multiples of 4 (`MKL_CBWR=SSE4_2`, `AUTO`, `AVX2`,
  `COMPATIBLE` on an Intel CPU reproduce those). `probe_row_padding` finds the smallest `RowPadding` (round
  the row count up to a multiple, never below a minimum) under which every row count and offset tried
  gives the bits of the same rows inside a large product, for the model's own weight shapes;
  `pad_linear_rows` then makes every linear layer of the model multiply that many rows (zero rows added,
  their outputs dropped) and decoding.py pads attention blocks the same way. Where no padding in the
  ladder works, the model is not batch-invariant on this CPU: `LanguageModel.batch_invariant` is False, a
  warning says so, and the bit-identity tests check that same flag.
- **Accurate elementwise functions on every thread.** torch computes cos, sin, exp, tanh, ... of a large
  float tensor with MKL's vector math library, split across threads. Measured here (Xeon, 2 threads, torch
  2.13.0+cpu): in ~1-5% of fresh processes the first such call after the thread pool has run other work
  computes one thread's share at ~1e-4 relative error (e.g. cos(1.0) = 0.5403335 instead of 0.5403023),
  and every later call is accurate. A model's first forward pass (its rotary embedding's cos and sin) then
  gives scores ~1e-4 off, so a job's first batch differs from run to run. One thread (Snakemake's default
  `threads: 1` for our jobs) never showed it. `warm_up_vector_math` calls each function once on every
  thread and checks the result against float64 before any model work; it repeats until clean.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

# Elementwise functions torch routes to MKL's vector math on CPU (ATen's vml.h) that models use:
# rotary embeddings (cos, sin), activations (exp, tanh, erf: silu, gelu, gelu-tanh), norms (sqrt).
VECTOR_MATH = ("cos", "sin", "exp", "tanh", "erf", "sqrt", "log")
# torch's unary kernels hand each thread chunks of at least this many elements.
_GRAIN = 2048


def _vector_math_errors(threads: int) -> dict[str, float]:
    """Largest relative error of each function against float64, over an input spread across all threads."""
    x = torch.linspace(0.01, 40.0, 2 * _GRAIN * max(1, threads), dtype=torch.float32)
    errors = {}
    for name in VECTOR_MATH:
        got = getattr(torch, name)(x).double()
        want = getattr(torch, name)(x.double())
        errors[name] = ((got - want).abs() / want.abs().clamp(min=1e-3)).max().item()
    return errors


def warm_up_vector_math(tries: int = 5, tolerance: float = 1e-6) -> bool:
    """Run every function of `VECTOR_MATH` on every thread until all are accurate (float32 results within
    `tolerance`, relative, of float64); False if they still are not after `tries` rounds."""
    threads = torch.get_num_threads()
    for attempt in range(1, tries + 1):
        bad = {name: err for name, err in _vector_math_errors(threads).items() if err > tolerance}
        if not bad:
            return True
        log.info("vector math round %d: inaccurate first calls %s (relative error); repeating", attempt, bad)
    log.warning(
        "elementwise functions stay inaccurate on this CPU after %d rounds (%s): results can differ "
        "between runs by ~1e-4",
        tries,
        bad,
    )
    return False


@dataclass(frozen=True)
class RowPadding:
    """Rows of a product rounded up to a multiple of `multiple`, and to at least `minimum`."""

    multiple: int = 1
    minimum: int = 1

    def rows(self, n: int) -> int:
        return max(self.minimum, -(-n // self.multiple) * self.multiple)

    @property
    def trivial(self) -> bool:
        return self.multiple == 1 and self.minimum == 1


# Tried in order: the cheapest padding that works wins. (1, 1) is what strict CNR mode gives on Intel Xeons.
LADDER = tuple(
    RowPadding(m, n)
    for m, n in (
        (1, 1),
        (1, 4),
        (4, 4),
        (1, 8),
        (4, 8),
        (8, 8),
        (1, 16),
        (4, 16),
        (16, 16),
        (1, 32),
        (16, 32),
        (32, 32),
        (1, 64),
        (32, 64),
        (64, 64),
    )
)
# Row counts and offsets tried: every small count (decoding steps, a batch's last rows), counts around
# the kernels' usual blocking, and a few prompt-pass sizes.
_COUNTS = (*range(1, 18), 23, 31, 32, 33, 63, 64, 65, 127, 128, 129, 257)
_OFFSETS = (0, 3)
_REFERENCE_ROWS = 300
# Probe shapes are capped: kernels block K and N in fixed sizes well below these.
_CAP_OUT, _CAP_IN = 1024, 2048


Linear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _padded_linear(x: torch.Tensor, weight: torch.Tensor, padding: RowPadding, linear: Linear) -> torch.Tensor:
    rows = x.shape[0]
    target = padding.rows(rows)
    if target != rows:
        x = torch.cat([x, x.new_zeros(target - rows, x.shape[1])])
    return linear(x, weight)[:rows]


def _works(padding: RowPadding, shapes: tuple[tuple[int, int], ...], linear: Linear) -> bool:
    gen = torch.Generator().manual_seed(0)
    for out_features, in_features in shapes:
        weight = torch.randn(out_features, in_features, generator=gen)
        rows = torch.randn(_REFERENCE_ROWS, in_features, generator=gen)
        reference = _padded_linear(rows, weight, padding, linear)
        for offset in _OFFSETS:
            for n in _COUNTS:
                if not torch.equal(
                    _padded_linear(rows[offset : offset + n], weight, padding, linear), reference[offset : offset + n]
                ):
                    return False
    return True


@functools.cache
def _probe(shapes: tuple[tuple[int, int], ...], linear: Linear) -> RowPadding | None:
    return next((padding for padding in LADDER if _works(padding, shapes, linear)), None)


def probe_row_padding(
    shapes: Iterable[tuple[int, int]], linear: Linear = torch.nn.functional.linear
) -> RowPadding | None:
    """The first padding of `LADDER` under which a row of every (out_features, in_features) product in
    `shapes` is the same bits whatever the product's row count and the row's offset; None if none is.
    Measured once per process and shape set (about a second for a small model on an idle core)."""
    capped = tuple(sorted({(min(o, _CAP_OUT), min(i, _CAP_IN)) for o, i in shapes}))
    return _probe(capped, linear)


def linear_shapes(model: torch.nn.Module) -> list[tuple[int, int]]:
    return sorted({tuple(m.weight.shape) for m in model.modules() if isinstance(m, torch.nn.Linear)})


def _padded_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    target = self.row_padding.rows(rows)
    if target == rows:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    flat = torch.cat([x.reshape(rows, x.shape[-1]), x.new_zeros(target - rows, x.shape[-1])])
    return torch.nn.functional.linear(flat, self.weight, self.bias)[:rows].reshape(*x.shape[:-1], -1)


def pad_linear_rows(model: torch.nn.Module, padding: RowPadding) -> int:
    """Make every linear layer of `model` multiply `padding.rows(n)` rows for an input of n rows; returns
    how many layers were changed (none for trivial padding)."""
    if padding.trivial:
        return 0
    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.row_padding = padding
            module.forward = types.MethodType(_padded_forward, module)
            changed += 1
    return changed


def make_batch_invariant(model: torch.nn.Module) -> RowPadding | None:
    """Set `model` (loaded with decoding's blocked attention) up for batch-invariant CPU inference: the row
    padding this CPU's products need, on its linear layers and its attention blocks. None where no padding
    of the ladder works: then the model is not batch-invariant here."""
    from .decoding import register_attention

    padding = probe_row_padding(linear_shapes(model))
    if padding is not None and not padding.trivial:
        pad_linear_rows(model, padding)
        model.set_attn_implementation(register_attention(pad_queries=True))
    return padding
