"""The install's files: planned against what is on disk, written atomically, secrets once.

A :class:`FileSpec` is a file's wanted content and mode. :func:`plan_files`
compares each with the file on disk: ``create``, ``update`` (content or mode
differs) or nothing; a *secret* (``keep=True``) is written only when missing
and never rewritten, so that a second ``coursehub deploy`` keeps the hub's
cookie secret and the service token (a new one would sign every user out and
cut the course app from the hub).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from coursehub.atomicfile import write_atomically
from coursehub.deploy.layout import DeployLayout

#: Mode of a secret: its owner (root) only.
SECRET_MODE = 0o600


@dataclass(frozen=True)
class FileSpec:
    """A file of the install: host path, content, mode; ``keep``: written once, never replaced."""

    path: PurePosixPath
    content: str
    mode: int = 0o644
    keep: bool = False


@dataclass(frozen=True)
class FileChange:
    """One file to write: ``action`` is ``create`` or ``update``, ``why`` says what differs."""

    spec: FileSpec
    action: str
    why: str = ""


def new_secrets() -> dict[str, str]:
    """Return fresh secrets: the cookie secret and the course app's token, 32 bytes in hex each.

    JupyterHub's cookie secret is "32 random bytes, hex-encoded" (JupyterHub
    documentation, "Security settings", cookie secret); service tokens of that
    entropy may be checked with one hash (``trust_user_provided_tokens``).
    """
    return {"cookie_secret": secrets.token_hex(32), "service_token": secrets.token_hex(32)}


def read_env_file(path: Path) -> dict[str, str]:
    """Return the ``KEY=value`` lines of an environment file (systemd.exec(5)); {} if missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs if not key.startswith("#")}


def render_env_file(values: Mapping[str, str], header: str) -> str:
    """Return ``values`` as an ``EnvironmentFile=`` text, one ``KEY=value`` a line (pure)."""
    return f"# {header}\n" + "".join(f"{key}={value}\n" for key, value in values.items())


def _change(layout: DeployLayout, spec: FileSpec) -> FileChange | None:
    path = layout.on_disk(spec.path)
    try:
        info = path.stat()
    except FileNotFoundError:
        return FileChange(spec, "create")
    mode = stat.S_IMODE(info.st_mode)
    if spec.keep:
        return None if mode == spec.mode else FileChange(spec, "update", f"mode {mode:04o}")
    if path.read_text(encoding="utf-8") != spec.content:
        return FileChange(spec, "update", "content")
    if mode != spec.mode:
        return FileChange(spec, "update", f"mode {mode:04o}")
    return None


def plan_files(layout: DeployLayout, specs: Iterable[FileSpec]) -> list[FileChange]:
    """Return the files to create or update below ``layout.root``, in ``specs`` order."""
    return [c for c in (_change(layout, s) for s in specs) if c is not None]


def plan_folders(layout: DeployLayout) -> list[tuple[PurePosixPath, int]]:
    """Return the folders to make or whose mode to set: ``(host path, mode)``."""
    changes = []
    for folder, mode in layout.folders().items():
        path = layout.on_disk(folder)
        if not path.is_dir() or stat.S_IMODE(path.stat().st_mode) != mode:
            changes.append((folder, mode))
    return changes


def apply_folders(layout: DeployLayout, folders: Iterable[tuple[PurePosixPath, int]]) -> None:
    """Make each folder (and its parents) and set its mode."""
    for folder, mode in folders:
        path = layout.on_disk(folder)
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)


def apply_files(layout: DeployLayout, changes: Iterable[FileChange]) -> None:
    """Write each changed file atomically with its mode (a kept file only gets its mode)."""
    for change in changes:
        path = layout.on_disk(change.spec.path)
        if change.spec.keep and change.action == "update":
            os.chmod(path, change.spec.mode)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, change.spec.content, mode=change.spec.mode)
        os.chmod(path, change.spec.mode)
