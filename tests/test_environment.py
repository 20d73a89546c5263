"""The environment the tests run in is the one constraints.txt records (make install installs within it)."""

import re
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")


def pins() -> dict[str, str]:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    found = {m.group(1).lower().replace("_", "-"): m.group(2) for line in lines if (m := PIN.match(line.strip()))}
    assert len(found) == sum(1 for line in lines if line.strip() and not line.startswith("#")), "a line is no pin"
    return found


def test_every_installed_package_is_the_version_constraints_txt_pins():
    pinned = pins()
    installed = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in metadata.distributions()}
    # the project's own requirements are all pinned, so a fresh resolve cannot pick another major version
    for name in ("torch", "transformers", "polars", "datasets", "huggingface-hub", "snakemake", "pyarrow"):
        assert name in pinned, f"constraints.txt pins no {name}"
    drift = {
        name: (want, installed[name])
        for name, want in pinned.items()
        if name in installed and installed[name].split("+")[0] != want
    }
    assert not drift, (
        f"installed versions differ from constraints.txt (pinned, installed): {drift}; run the tests, "
        "then `make constraints` if the new versions are meant"
    )


def test_the_gpu_extras_packages_are_pinned_though_not_installed_here():
    """make install-gpu installs the `gpu` extra on GPU nodes only, within constraints.txt: every package of the
    extra has its pin there (make constraints keeps them where .venv lacks them), fla-core's too."""
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    names = {re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower() for requirement in extra}
    assert names == {"flash-linear-attention", "causal-conv1d"}
    assert names | {"fla-core", "einops", "ninja"} <= set(pins())
    assert pins()["fla-core"] == pins()["flash-linear-attention"]  # one release: the package and its kernels
