"""What the site's header shows besides the page: IRON's version and its repository.

``docs/hooks.py`` reads both when mkdocs loads its config; the tests import
this module without mkdocs.
"""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABOUT = ROOT / "packages" / "iron-core" / "src" / "iron" / "core" / "__about__.py"
_SSH = re.compile(r"(?:ssh://)?git@(?P<host>[^:/]+)[:/](?P<path>.+?)(?:\.git)?/?")


def version() -> str:
    """iron-core's version, as its ``__about__.py`` says (hatch reads the same file)."""
    return runpy.run_path(str(ABOUT))["__version__"]


def web_address(remote: str) -> str | None:
    """The web page of a git remote, or None for one with no web page (a local path).

    An ``https`` remote is kept (without ``.git``); an ``ssh`` one such as
    ``git@github.com:owner/name.git`` becomes ``https://github.com/owner/name``.
    """
    remote = remote.strip()
    ssh = _SSH.fullmatch(remote)
    if ssh:
        return f"https://{ssh.group('host')}/{ssh.group('path')}"
    if remote.startswith(("https://", "http://")):
        return remote.rstrip("/").removesuffix(".git")
    return None


def repository_url(root: Path = ROOT) -> str | None:
    """The web page of the ``origin`` remote of the clone at ``root``, or None."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:  # no git
        return None
    if done.returncode != 0:
        return None
    return web_address(done.stdout)
