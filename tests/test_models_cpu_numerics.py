"""The CPU numerics batch invariance rests on (models/cpu_numerics.py): row padding found by a probe, and
elementwise functions checked on every thread. MKL's other code paths on this machine stand in for CPUs
whose matrix products depend on the row count (an AMD EPYC under MKL's strict mode differed at 1 and 3
rows; `MKL_CBWR=SSE4_2,STRICT` differs below 8 rows, `COMPATIBLE,STRICT` also off multiples of 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from debate_audit.models.cpu_numerics import (
    LADDER,
    RowPadding,
    _vector_math_errors,
    pad_linear_rows,
    probe_row_padding,
    warm_up_vector_math,
)


def test_row_padding_rounds_up_to_its_multiple_and_never_below_its_minimum():
    assert [RowPadding(1, 1).rows(n) for n in (1, 3, 8)] == [1, 3, 8]
    assert [RowPadding(4, 8).rows(n) for n in (1, 3, 8, 9, 12, 13)] == [8, 8, 8, 12, 12, 16]
    assert [RowPadding(1, 8).rows(n) for n in (1, 7, 8, 9)] == [8, 8, 8, 9]
    assert RowPadding().trivial and not RowPadding(1, 4).trivial
    assert LADDER[0] == RowPadding() and len(set(LADDER)) == len(LADDER)


def _kernel_with_small_row_paths(min_rows: int, multiple: int):
    """A product whose bits depend on the row count as some BLAS kernels' do: products of fewer than
    `min_rows` rows, or of a row count off a multiple of `multiple`, are rounded differently."""

    def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.nn.functional.linear(x.double(), weight.double())
        if x.shape[0] < min_rows or x.shape[0] % multiple:
            out = out * (1 + 2**-30)
        return out.float()

    return linear


@pytest.mark.parametrize(
    ("min_rows", "multiple", "expected"),
    [
        (1, 1, RowPadding(1, 1)),
        (4, 1, RowPadding(1, 4)),
        (8, 1, RowPadding(1, 8)),
        (8, 4, RowPadding(4, 8)),
        (16, 1, RowPadding(1, 16)),
    ],
)
def test_the_probe_picks_the_cheapest_padding_that_hides_the_row_count(min_rows, multiple, expected):
    linear = _kernel_with_small_row_paths(min_rows, multiple)
    assert probe_row_padding([(64, 32), (48, 96)], linear=linear) == expected


def test_the_probe_says_so_when_no_padding_hides_the_row_count():
    def linear(x, weight):  # every row count its own bits, as no real kernel should
        return torch.nn.functional.linear(x, weight) * (1 + x.shape[0] * 2**-20)

    assert probe_row_padding([(64, 32)], linear=linear) is None


def test_padded_linear_layers_give_the_rows_of_the_padded_product_and_keep_shapes():
    torch.manual_seed(0)
    layer = torch.nn.Linear(24, 40)
    x = torch.randn(2, 3, 24)
    plain = layer(x)
    assert pad_linear_rows(torch.nn.Sequential(layer), RowPadding(4, 8)) == 1
    padded = layer(x)
    assert padded.shape == plain.shape
    full = torch.nn.functional.linear(torch.cat([x.reshape(6, 24), torch.zeros(2, 24)]), layer.weight, layer.bias)
    assert torch.equal(padded.reshape(6, 40), full[:6])
    assert pad_linear_rows(torch.nn.Sequential(torch.nn.Linear(2, 2)), RowPadding()) == 0


def test_elementwise_functions_are_accurate_on_every_thread_after_the_warm_up():
    assert warm_up_vector_math()
    errors = _vector_math_errors(torch.get_num_threads())
    assert max(errors.values()) <= 1e-6, errors


# Scores and greedy text of the embedded model alone and batched, in a fresh process under an MKL code path.
_CHECK = textwrap.dedent("""
    import json, sys
    from debate_audit.models import GenerationParams, LanguageModel, cpu_numerics
    if sys.argv[2] == "off":  # the batch-invariant path as it was before the padding: no probe, no padding
        cpu_numerics.probe_row_padding = lambda shapes: cpu_numerics.RowPadding()
    model_dir = sys.argv[1]
    words = " ".join(["time year people way day man thing woman life child world school state"] * 30)
    lm = LanguageModel(model_dir, batch_size=8, cache=None)
    ids = lm._encode(words)
    prompts = [lm.tokenizer.decode(ids[: n - 3]) + "\\nAnswer:" for n in (5, 67, 129, 200)]
    prompts.append(lm.render_chat([{"role": "user", "content": "Pick A or B."}], assistant_prefix="Answer:"))
    convs = [[{"role": "user", "content": q}] for q in ("Name a fruit.", "Say hello.", "Why is the sky blue?")]
    params = GenerationParams(max_new_tokens=10)
    def alone(**kw):
        return LanguageModel(model_dir, cache=None, model=lm.model, tokenizer=lm.tokenizer, batch_size=1,
                             prefix_store_mb=0, prefix_sharing=False, **kw)
    print(json.dumps({
        "padding": str(lm.row_padding), "invariant": lm.batch_invariant,
        "scores_equal": lm.choice_logprobs(prompts, [" A", " B"]) == [alone().choice_logprobs([p], [" A", " B"])[0] for p in prompts],
        "text_equal": lm.generate(convs, params) == [alone().generate([c], params)[0] for c in convs],
    }))
""")


def _check(embedded_model_dir, mkl_cbwr: str, padding: str) -> dict:
    env = dict(os.environ, MKL_CBWR=mkl_cbwr)
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, str(embedded_model_dir), padding],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("mkl_cbwr", ["COMPATIBLE,STRICT"])  # differs below 8 rows and off multiples of 4
def test_a_cpu_whose_products_depend_on_the_row_count_gets_batch_invariance_from_the_padding(
    embedded_model_dir, mkl_cbwr
):
    without = _check(embedded_model_dir, mkl_cbwr, "off")
    if without["scores_equal"] and without["text_equal"]:
        pytest.skip(f"MKL_CBWR={mkl_cbwr} gives row-invariant products on this CPU: nothing to stand in for")
    padded = _check(embedded_model_dir, mkl_cbwr, "on")
    assert padded["invariant"] and padded["padding"] != str(RowPadding()), padded
    assert padded["scores_equal"] and padded["text_equal"], padded


_FIRST_CALL = textwrap.dedent("""
    import json, sys
    from debate_audit.models import LanguageModel
    lm = LanguageModel(sys.argv[1], batch_size=4, cache=None)
    prompts = [lm.render_chat([{"role": "system", "content": "You are a careful judge."},
                               {"role": "user", "content": q + " Answer A: yes. Answer B: no."}], assistant_prefix="Answer:")
               for q in ("Is ice cold?", "Do goldfish have a three-second memory? Explain briefly.")]
    print(json.dumps(lm.choice_logprobs(prompts, [" A", " B"])))
""")


@pytest.mark.slow
def test_fresh_processes_give_the_same_bits_on_their_first_call(embedded_model_dir):
    # The first forward pass of a process is where inaccurate first vector-math calls showed (1e-4 apart in
    # about one fresh 2-thread process in six before the warm-up); every process must agree to the bit.
    runs = [
        subprocess.run(
            [sys.executable, "-c", _FIRST_CALL, str(embedded_model_dir)],
            capture_output=True,
            text=True,
            timeout=900,
            env=dict(os.environ, OMP_NUM_THREADS="2"),
        )
        for _ in range(4)
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    scores = {r.stdout.strip().splitlines()[-1] for r in runs}
    assert len(scores) == 1, scores
