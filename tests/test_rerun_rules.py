"""One rerun mechanism (docs/development.md): a rule's params carry the settings its output depends on and
`library=library_code("<its script>")`, the hash of every library file its script reaches; no hand-kept
version string or content id beside them."""

import re
import shutil

from conftest import REPO

from debate_audit.runtime import provenance
from debate_audit.runtime.provenance import code_fingerprint


def _rule_blocks() -> dict[str, str]:
    blocks = {}
    for path in (REPO / "rules").glob("*.smk"):
        text = path.read_text()
        # rules may sit inside an if/else (rules/debate.smk): a block ends at the next line as far left
        for match in re.finditer(r"^( *)rule (\w+):\n(.*?)(?=^\1\S|\Z)", text, re.S | re.M):
            blocks[match.group(2)] = match.group(3)
    return blocks


def test_every_scripted_rule_carries_its_scripts_library_fingerprint_and_no_version_id():
    blocks = _rule_blocks()
    scripted = {rule: block for rule, block in blocks.items() if "script:" in block}
    assert len(scripted) > 30
    for rule, block in scripted.items():
        script = re.search(r'scripts/(\w+)\.py"', block).group(1)
        assert f'library=library_code("{script}")' in block, rule
        assert not re.search(r"^\s+\w+_version=|^\s+\w+=\w+_(id|version)\(", block, re.M), rule


def test_a_package_data_file_is_part_of_the_fingerprint_of_the_scripts_that_render_it(tmp_path):
    root = tmp_path / "debate_audit"
    shutil.copytree(provenance.ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    scripts = REPO / "workflow" / "scripts"
    code_fingerprint.cache_clear()
    before = {s: code_fingerprint(scripts / f"{s}.py", root) for s in ("browse", "audit_statistics")}
    page = root / "views" / "browse" / "page.html"
    page.write_text(page.read_text().replace("<title>", "<title>edited ", 1))
    code_fingerprint.cache_clear()
    after = {s: code_fingerprint(scripts / f"{s}.py", root) for s in before}
    assert after["browse"] != before["browse"]
    assert after["audit_statistics"] == before["audit_statistics"]
