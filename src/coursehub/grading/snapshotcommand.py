"""``coursehub exam snapshot``: the autosave of an exam's homes, from a timer or as a watch.

The copies: :mod:`coursehub.grading.examsnapshot`; the command line:
:mod:`coursehub.grading.examcli`.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError


def snapshot(args: argparse.Namespace) -> int:
    """``coursehub exam snapshot``: copy each exam home of the exam into the store (root).

    With ``--every S``: again every S seconds, each home only when it changed,
    until interrupted. Each copy's time and SHA-256 go to the catalog (the
    proctor's "last save") when there is one (:func:`_record`).
    """
    from coursehub.examroom.home import DEFAULT_EXAM_ROOT, check_part
    from coursehub.grading.examsnapshot import snapshot_exam

    parts = (check_part("course_id", args.course_id), check_part("assignment", args.assignment))
    root = args.homes or os.environ.get("COURSEHUB_EXAM_ROOT") or DEFAULT_EXAM_ROOT
    homes, store = Path(root).joinpath(*parts), Path(args.store).joinpath(*parts)
    every_s = _every_s(args.every)
    seen: dict[str, tuple[float, int]] | None = {} if every_s else None
    recording = _catalog_url(args.database_url)
    while True:
        taken = snapshot_exam(homes, store, seen=seen)
        for student, snap in taken.items():
            skipped = f", skipped: {', '.join(snap.skipped)}" if snap.skipped else ""
            digest = snap.manifest_sha256[:12]
            print(f"{student}: {len(snap.files)} files, sha256 {digest}{skipped}", flush=True)
        if taken and recording:
            recording = _record(recording, args, taken)
        if not every_s:
            print(f"snapshot of {args.assignment}: {len(taken)} exam homes")
            return 0
        time.sleep(every_s)


def _catalog_url(url: str | None) -> str | None:
    """The catalog to record saves in: ``--database-url``, else the configured one if it exists.

    A SQLite catalog that is not there is not made (None): the autosave does
    not need the catalog, only the proctor's table does.
    """
    from coursehub.catalog.db import database_url

    url = url or database_url()
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        return None
    return url


def _record(url: str, args: argparse.Namespace, taken: dict[str, Any]) -> str | None:
    """Record each copy's time and SHA-256 as the student's last save; return ``url``, or None
    (with one line saying why) when the catalog cannot be used, so that the copies go on."""
    from datetime import UTC, datetime

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.db import session_factory
    from coursehub.catalog.examproctor import record_save
    from coursehub.catalog.exams import get_exam

    try:
        with open_catalog(url) as engine, session_factory(engine)() as session:
            course = get_course(session, args.course_id)
            exam = get_exam(session, course, args.assignment)
            now = datetime.now(UTC)
            for student, snap in taken.items():
                try:
                    record_save(session, course, exam, student, now, snap.manifest_sha256)
                except UsageError as exc:  # a home of nobody's sitting: copied, not recorded
                    print(f"{student}: save not recorded: {exc}", flush=True)
            session.commit()
    except CoursehubError as exc:
        print(f"last saves not recorded in the catalog: {exc}", flush=True)
        return None
    return url


def _every_s(text: str | None) -> float:
    """``--every``: seconds between watches (0.5 to 3600), 0 when not given."""
    if text is None:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= 3600:
        raise UsageError(f"--every: must be 0.5 to 3600 seconds, got {text!r}")
    return value
