"""Every command the README and docs/ show is run, as a dry run where it would start model work, so the pages
cannot drift from the code: a renamed target, key, overlay or option fails here. Links between the pages
must point at files that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The pages whose links, `make` targets and `debate-audit` subcommands are checked (the front door and the
# READMEs it links to).
REFERENCE_PAGES = [
    *PAGES,
    *(REPO / folder / "README.md" for folder in ("config", "tests", "benchmarks", "envs")),
]
# What the pages may show without it being run here: cluster, editor, shell and install steps.
NOT_RUN = (
    "srun", "sbatch", "cp", "$EDITOR", "export", "git", "pip", "python3", "cd", "bash", "pre-commit", "inspect",
    "source",
)  # fmt: skip
BIN = REPO / ".venv" / "bin"


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every command line of the pages' ```bash blocks, continuations joined and
    trailing comments cut."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                command = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
                found.append((page.relative_to(REPO).as_posix(), command))
    return found


def dry_run(command: str) -> list[str] | None:
    """The command line that checks `command` without model work, or None where it is not run here."""
    words = shlex.split(command.replace("$(nproc)", "2"))
    program = words[0].removeprefix(".venv/bin/")
    if program in NOT_RUN or words[0].startswith("$"):
        return None
    if program == "make":
        target, assigned = words[1], dict(w.split("=", 1) for w in words[2:] if "=" in w)
        if target in ("run", "inspect", "prefetch"):  # what Snakemake would run, as a dry run
            assigned["SNAKEMAKE_ARGS"] = f"{assigned.get('SNAKEMAKE_ARGS', '')} -n --quiet rules".strip()
            return ["make", target, *(f"{k}={v}" for k, v in assigned.items())]
        if target == "plan":  # a dry run itself
            return ["make", *words[1:]]
        return ["make", "-n", *words[1:]]  # the target and its variables exist
    if program == "snakemake":
        # the site copy of the SLURM profile (docs/cluster.md, step 1) is the shipped one with two settings
        args = ["profiles/slurm" if w == "profiles/site" else w for w in words[1:]]
        return [str(BIN / "snakemake"), *args, "-n", "--quiet", "rules"]
    if program == "debate-audit":
        sub = words[1]
        if sub in ("run", "inspect", "browse"):
            extra = [] if "--" in words else ["--"]
            return [str(BIN / "debate-audit"), *words[1:], *extra, "-n", "--quiet", "rules"]
        if sub == "plan":
            return [str(BIN / "debate-audit"), *words[1:]]
        return [str(BIN / "debate-audit"), sub, "--help"]  # compare, pin: need results or the hub
    if program == "pytest":
        return [str(BIN / "pytest"), *words[1:], "--collect-only", "-q"]
    if program == "python" and words[1:2] == ["-m"]:
        return [str(BIN / "python"), "-m", words[2], "--help"]
    raise AssertionError(f"a command the docs test does not know how to check: {command!r} (add it to NOT_RUN?)")


def test_the_pages_show_commands_and_each_is_checkable():
    commands = shown_commands()
    assert len(commands) > 10
    assert any(c.startswith("make run") for _, c in commands)
    assert [c for _, c in commands if dry_run(c) is not None]


@pytest.mark.slow
def test_every_shown_command_runs_as_a_dry_run():
    from concurrent.futures import ThreadPoolExecutor

    lines: dict[tuple[str, ...], tuple[str, str]] = {}
    for page, command in shown_commands():
        line = dry_run(command)
        if line is not None:
            lines.setdefault(tuple(line), (page, command))

    def run(line: tuple[str, ...]) -> subprocess.CompletedProcess:
        return subprocess.run(line, cwd=REPO, capture_output=True, text=True, timeout=600)

    # two at a time: each is a Snakemake or Python start-up, one core each; a dry run takes no lock
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(zip(lines, pool.map(run, lines)))
    assert done
    for line, result in done.items():
        page, command = lines[line]
        output = (result.stdout + result.stderr)[-3000:]
        assert result.returncode == 0, f"{page}: {command!r} -> {' '.join(line)}:\n{output}"


def relative_links(text: str) -> list[str]:
    """The file part of every Markdown link and image in `text` that is not a URL or a bare anchor."""
    return [
        t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t and not t.startswith("mailto:")
    ]


def code_texts(text: str) -> list[str]:
    """What a page shows as code: its fenced blocks and its inline code spans."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return fenced + re.findall(r"`([^`\n]+)`", prose)


def named(pattern: str, page: Path) -> set[str]:
    """The words `pattern`'s group catches in `page`'s code (the target of `make X`, the subcommand of
    `debate-audit X`)."""
    found = set()
    for code in code_texts(page.read_text()):
        found |= set(re.findall(pattern, code, re.M))
    return found


def makefile_targets() -> set[str]:
    """The targets the Makefile has a rule for (its `target: ...` lines; variable assignments left out)."""
    targets = set()
    for line in (REPO / "Makefile").read_text().splitlines():
        rule = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?![=:])", line)
        if rule:
            targets |= set(rule.group(1).split())
    return targets


def cli_subcommands() -> set[str]:
    from debate_audit.cli import build_parser

    parser = build_parser()
    (sub,) = (a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_the_reference_pages_are_read():
    assert all(page.is_file() for page in REFERENCE_PAGES)
    assert {"run", "test", "plan", "install"} <= makefile_targets()
    assert {"run", "plan", "compare"} <= cli_subcommands()
    assert "run" in named(r"(?:^|\s)make\s+([a-z][\w-]*)", REPO / "README.md")


def test_every_relative_link_of_the_pages_points_at_a_file():
    missing = [
        f"{page.relative_to(REPO)}: link to {target} (no such file)"
        for page in REFERENCE_PAGES
        for target in relative_links(page.read_text())
        if not (page.parent / target).exists()
    ]
    assert not missing, "\n".join(missing)


def test_every_make_target_the_pages_name_is_a_rule_of_the_makefile():
    targets = makefile_targets()
    unknown = [
        f"{page.relative_to(REPO)}: make {name}"
        for page in REFERENCE_PAGES
        for name in sorted(named(r"(?:^|[\s(])make\s+([a-z][\w-]*)", page))
        if name not in targets
    ]
    assert not unknown, f"no such Makefile target: {unknown}"


def test_every_debate_audit_subcommand_the_pages_name_exists():
    subcommands = cli_subcommands()
    unknown = [
        f"{page.relative_to(REPO)}: debate-audit {name}"
        for page in REFERENCE_PAGES
        for name in sorted(named(r"(?:^|[\s/(])debate-audit\s+([a-z][\w-]*)", page))
        if name not in subcommands
    ]
    assert not unknown, f"no such debate-audit subcommand: {unknown}"


def test_the_cluster_page_says_how_each_shared_data_folder_an_overlay_reads_reaches_a_cluster():
    """Overlays read `../shared/data/<folder>/`, which is not in the checkout and no rule downloads: the
    cluster page's first-contact list names each such folder and how it gets beside the checkout."""
    read = set()
    for overlay in sorted((REPO / "config").glob("*.yaml")):
        read |= set(re.findall(r"\.\./shared/data/(\w+)/", overlay.read_text()))
    assert "er_audit_release" in read  # config/release-split.yaml, config/release-transcripts.yaml
    page = " ".join((REPO / "docs/cluster.md").read_text().split())
    contact = page[page.index("First contact with a real node") :]
    assert read <= set(re.findall(r"`(?:\.\./shared/data/)?(\w+)/`", contact))
    assert "rsync -a ../shared/data/ " in contact
    # the release commit the page names is the one the copies here came from
    readme = SHARED_DATA / "er_audit_release" / "README.md"
    if readme.exists():
        (commit,) = re.findall(r"commit `([0-9a-f]{40})`", readme.read_text())
        assert commit in contact
