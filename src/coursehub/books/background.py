"""A book build started in the background: a detached ``coursehub book build`` process.

The course app (``Build book``) and the demo never build inside their own
process: they start ``python -m coursehub book build COURSE_ID`` in a new
session (it outlives a restart of the app) and return at once. The build
records its state itself (:mod:`coursehub.books.build`); the launcher's own
output goes to ``<course>/launcher.log``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.books.build import SERVED_KEYS, is_building, now_text
from coursehub.books.settings import BookPaths, read_settings, read_state, write_state


def start_build(
    paths: BookPaths,
    *,
    material_dir: Path | None = None,
    shared_root: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Start a build of the course's book in a detached process; False if one is running.

    The state file says ``queued`` (with the process id) until the build
    takes its lock and writes ``building``. The child is reaped by a daemon
    thread of this process, so it leaves no zombie.
    """
    if is_building(paths):
        return False
    paths.dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if environ is None else environ)
    env["COURSEHUB_BOOKS_DIR"] = str(paths.root)
    if material_dir is not None:
        env["COURSEHUB_MATERIAL_DIR"] = str(material_dir)
    if shared_root is not None:
        env["COURSEHUB_SHARED_ROOT"] = str(shared_root)
    command = [sys.executable, "-m", "coursehub", "book", "build", paths.course_id]
    with open(paths.dir / "launcher.log", "ab") as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    previous = read_state(paths)
    served: dict[str, Any] = {k: previous[k] for k in SERVED_KEYS if k in previous}
    state = {**served, "state": "queued", "started": now_text(), "pid": process.pid}
    if not is_building(paths):  # the build has not written its own state yet
        write_state(paths, state)
    threading.Thread(target=process.wait, name=f"book-{paths.course_id}", daemon=True).start()
    return True


def build_if_asked(
    paths: BookPaths,
    changed: bool,
    *,
    material_dir: Path | None = None,
    shared_root: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """After a material update, start a build when the course asks for it; True if started.

    Nothing starts when the update brought no new commit (``changed``
    False), when the course's ``build_on_update`` setting is off, or while
    a build runs (:func:`start_build`).

    Raises
    ------
    UsageError
        If the course's book settings file is unreadable.
    """
    if not changed or not read_settings(paths).build_on_update:
        return False
    return start_build(paths, material_dir=material_dir, shared_root=shared_root, environ=environ)
