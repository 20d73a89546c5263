"""The Snakemake report's declarations: every caption a rule names exists, parses, and none is orphaned.

The report itself is built from the smoke run in tests/test_workflow.py (slow); these checks are instant.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
from docutils.core import publish_parts

REPO = Path(__file__).resolve().parents[1]
CAPTIONS = REPO / "report" / "captions"


def declared_captions() -> set[str]:
    names = set()
    for smk in sorted((REPO / "rules").glob("*.smk")):
        text = smk.read_text()
        for name in re.findall(r'caption=f?"\.\./report/captions/([^"]+)"', text):
            if "{figure}" in name:  # cwpor_analysis.smk: one caption per entry of CWPOR_FIGURES
                block = re.search(r"CWPOR_FIGURES = \[(.*?)\]", text, re.S).group(1)
                names |= {name.replace("{figure}", f) for f in re.findall(r'"(\w+)"', block)}
            else:
                names.add(name)
    return names


def test_every_declared_caption_exists_and_none_is_orphaned():
    declared = declared_captions()
    assert len(declared) >= 15
    present = {p.name for p in CAPTIONS.glob("*.rst")}
    assert declared - present == set(), "captions named in rules/ but missing"
    assert present - declared == set(), "caption files no rule uses"


@pytest.mark.parametrize("caption", sorted(p.name for p in CAPTIONS.glob("*.rst")) + ["../workflow.rst"])
def test_caption_is_valid_jinja_and_restructuredtext(caption):
    text = (CAPTIONS / caption).read_text()
    jinja2.Environment().parse(text)  # raises on a template syntax error
    # with the template expressions blanked, the text must be clean reStructuredText
    plain = re.sub(r"\{\{.*?\}\}", "X", text, flags=re.S)
    parts = publish_parts(plain, writer="html", settings_overrides={"report_level": 2, "halt_level": 2})
    assert parts["body"].strip()


def test_workflow_description_is_the_snakefile_report_directive():
    assert 'report: "report/workflow.rst"' in (REPO / "Snakefile").read_text()
