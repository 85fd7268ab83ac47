"""The CI user's path: installs that exist, the action, the workflow, the Kubernetes job."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import swarm_cli

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# What a user copies: an install line in any of these must name a source, never a bare
# package name that nobody published.
USER_FILES = [ROOT / "README.md", *sorted((ROOT / "examples").iterdir())]
_INSTALL = re.compile(r"\b(?:pip|pipx|uv tool|uv pip)\s+install\b([^\n`]*)")


def _user_files() -> list[Path]:
    extra = [ROOT / "action.yml", *sorted((ROOT / "action").glob("*"))]
    return [p for p in [*USER_FILES, *extra] if p.is_file()]


def test_installs_never_name_the_unpublished_package_alone() -> None:
    checked = 0
    for path in _user_files():
        for line in _INSTALL.findall(path.read_text()):
            checked += 1
            if "swarm-cli" in line or "swarm_cli" in line:
                assert "git+" in line or ".whl" in line, f"{path.name}: install {line!r}"
    assert checked >= 4  # the README's installs were found


def test_the_version_lives_in_one_place() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"]
    assert "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "swarm_cli.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", swarm_cli.__version__)
    # The README's install examples name the current release.
    assert f"@v{swarm_cli.__version__}" in (ROOT / "README.md").read_text()
