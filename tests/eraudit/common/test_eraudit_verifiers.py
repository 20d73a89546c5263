"""One definition of the verifiers: every figure draws a verifier in the same colour with the same label."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import polars as pl  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from debate_audit.eraudit.audit.figures import plot_cr, plot_scatter  # noqa: E402
from debate_audit.eraudit.audit.verdicts import BASE, TARGETS  # noqa: E402
from debate_audit.eraudit.common import verifiers  # noqa: E402
from debate_audit.eraudit.verifier.curves import plot_loss_curves  # noqa: E402
from debate_audit.eraudit.verifier.finetune import VARIANTS  # noqa: E402
from debate_audit.eraudit.verifier.table1 import VERIFIERS  # noqa: E402


@pytest.fixture
def drawn(monkeypatch):
    """{legend label: hex colour} of every legend entry of every figure saved while the fixture is active."""
    seen: dict[str, set[str]] = {}

    def savefig(fig, *args, **kwargs):
        for ax in fig.axes:
            handles, labels = ax.get_legend_handles_labels()
            for handle, text in zip(handles, labels):
                if hasattr(handle, "patches"):  # bars
                    colour = handle.patches[0].get_facecolor()
                elif hasattr(handle, "get_offsets"):  # a scatter collection
                    colour = handle.get_facecolor()[0]
                else:  # a line
                    colour = handle.get_color()
                seen.setdefault(text, set()).add(mcolors.to_hex(colour))

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def test_loss_curves_and_audit_figures_share_label_and_colour_per_variant(tmp_path, drawn):
    curve = tmp_path / "curve.parquet"
    pl.DataFrame(
        [
            {
                "dataset": "d",
                "variant": v,
                "step": s,
                "loss": 1.0 / s,
                "loss_lm": 0.5,
                "loss_fc": 0.5,
                "loss_qh": 0.1 if v == "org" else None,
            }
            for v in VARIANTS
            for s in (1, 2)
        ]
    ).write_parquet(curve)
    plot_loss_curves([curve], tmp_path / "c.png", tmp_path / "c.svg", dataset="d")
    curves = dict(drawn)
    drawn.clear()
    plot_cr(pl.DataFrame({"dataset": ["d"] * 3, "target": list(TARGETS), "cr": [0.1, 0.5, 0.9]}), tmp_path / "cr.png")
    bars = dict(drawn)
    drawn.clear()
    plot_scatter(
        pl.DataFrame(
            {
                "dataset": ["d"] * 3,
                "target": list(TARGETS),
                "p_target_qh": [0.2, 0.5, 0.8],
                "delta_max": [0.1, 2.0, 5.0],
                "epsilon": [1.0] * 3,
            }
        ),
        tmp_path / "s.png",
    )
    points = {k: v for k, v in drawn.items() if k.startswith("V_")}
    expected = {verifiers.label(v): {mcolors.to_hex(verifiers.color(v))} for v in TARGETS}
    assert curves == expected
    assert bars == expected
    assert points == expected
    # the colours tell the variants apart
    assert len({c for cs in expected.values() for c in cs}) == len(TARGETS)


def test_every_consumer_reads_the_one_definition():
    assert VARIANTS == {"honest": "honest", "adv": "adversarial", "org": "adversarial"}
    assert VERIFIERS == [BASE, *TARGETS, "copy"] == ["base", "honest", "adv", "org", "copy"]
    assert verifiers.AUDIT_TARGETS == (*TARGETS, "copy") and not verifiers.COPY.trained
    assert not verifiers.BASE.trained and all(verifiers.VERIFIERS[v].trained for v in TARGETS)
    assert verifiers.label("unknown") == "unknown" and verifiers.color("unknown") is None


def test_config_schema_allows_exactly_the_fine_tuned_variants_and_the_copy_as_audit_targets():
    # JSON schema cannot import the module: this keeps its enum and verifiers.py in step.
    from pathlib import Path

    import yaml

    schema = yaml.safe_load((Path(__file__).resolve().parents[3] / "config/schema.yaml").read_text())
    enum = schema["properties"]["audit"]["properties"]["targets"]["items"]["enum"]
    assert enum == [*VARIANTS, "copy"] == list(verifiers.AUDIT_TARGETS)
