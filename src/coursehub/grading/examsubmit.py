"""At the bell: submit a student's saved exam work, refuse it after their end, give a receipt.

An exam is an nbgrader assignment (:mod:`coursehub.catalog.exams`); its
submissions go through the course's ordinary exchange, with
:class:`coursehub.grading.exchange.PrivateSubmit`: the whole submission is
written in a hidden staging folder of the inbound and renamed into place in
one ``rename(2)``, so that a collect running while 120 students submit in the
same seconds (jupyter/nbgrader#919) takes every submission whole or not at
all (``tests/test_submit_atomic.py``, ``benchmarks/bench_exam.py``).

* :func:`plan_exam_submit` (pure): a student's submission after their end
  (:func:`coursehub.catalog.examtime.plan_end`) is refused, with the end and
  the receipt of what was taken; so is any after the bell's. The bell's own
  submission (``bell=True``) is the one allowed after the end: it takes the
  work as saved.
* :func:`submit_exam_work`: the submission itself; the :class:`Receipt`
  holds nbgrader's time of the submission (``timestamp.txt``), the name of
  the folder in the inbound, the SHA-256 of each file submitted and the
  SHA-256 of their manifest (:func:`manifest_sha256`: ``sha256sum``'s
  ``<hex>  <path>`` lines, sorted by path), so a student can check a file
  of theirs with ``sha256sum``. The caller keeps it in the catalog
  (:func:`coursehub.catalog.exams.record_receipt`).
* :func:`verify_collected`: whether a collected folder (``submitted/``)
  holds exactly what the receipt says.

nbgrader's own files of a submission (``timestamp.txt``,
``submission_secret.txt``: :data:`coursehub.grading.receipts.RECEIPT_FILES`)
are left out of the manifest: they are nbgrader's, not the student's work.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path

from coursehub.catalog.exams import Receipt, Sitting
from coursehub.catalog.examtime import format_moment
from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.exchange import STAGING_PREFIX, submit_assignment
from coursehub.grading.layout import CourseLayout
from coursehub.grading.receipts import RECEIPT_FILES

#: Bytes read at a time while hashing.
CHUNK = 1 << 20


class LateExamSubmissionError(UsageError):
    """A submission refused because the student's exam is over; the message says when and why."""


def plan_exam_submit(sitting: Sitting, now: datetime, timezone: str, bell: bool = False) -> str:
    """Return why a submission at ``now`` is refused (``""``: it may go ahead) (pure).

    Refused: not started; after the bell's submission; after the student's
    end unless it is the bell's.
    """
    if sitting.started_at is None or sitting.ends_at is None:
        return "you have not started this exam: nothing to submit"
    receipt = _receipt_line(sitting, timezone)
    if sitting.final:
        return f"your exam was submitted at the bell{receipt}; no later submission is taken"
    if not bell and now > sitting.ends_at:
        end = format_moment(sitting.ends_at, timezone)
        return f"your exam ended at {end}: submissions are closed" + (
            f"; your last submission is what is graded{receipt}"
            if receipt
            else "; no submission of yours was received before it"
        )
    return ""


def _receipt_line(sitting: Sitting, timezone: str) -> str:
    if sitting.submitted_at is None or sitting.receipt_sha256 is None:
        return ""
    when = format_moment(sitting.submitted_at, timezone)
    return f" (last submission {when}, SHA-256 {sitting.receipt_sha256})"


def file_sha256(path: Path) -> str:
    """Return the SHA-256 (hex) of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def digest_folder(folder: Path) -> dict[str, str]:
    """Return ``{relative path: SHA-256}`` of every regular file under ``folder``.

    nbgrader's :data:`RECEIPT_FILES` at the top are left out; links are not
    followed (a submission holds none: PrivateSubmit and collect drop them).
    """
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in filenames:
            path = Path(dirpath) / name
            relative = path.relative_to(folder).as_posix()
            if relative in RECEIPT_FILES or path.is_symlink() or not path.is_file():
                continue
            files[relative] = file_sha256(path)
    return files


def manifest_sha256(files: dict[str, str]) -> str:
    """Return the SHA-256 of ``sha256sum``'s lines for ``files`` (``<hex>  <path>\\n``, by path)."""
    text = "".join(f"{files[name]}  {name}\n" for name in sorted(files))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def newest_submission(layout: CourseLayout, assignment: str, student: str) -> Path:
    """Return the student's newest folder of ``assignment`` in the inbound.

    Raises
    ------
    CoursehubError
        If there is none (the submit did not reach the inbound).
    """
    inbound = layout.exchange_root / layout.course_id / "inbound"
    found = [
        p
        for p in inbound.glob(f"{student}+{assignment}+*")
        if not p.name.startswith(STAGING_PREFIX) and p.is_dir()
    ]
    if not found:
        raise CoursehubError(f"no submission of {assignment} by {student} in {inbound}")
    return max(found, key=lambda p: _submission_time(p))


def _submission_time(folder: Path) -> datetime:
    from nbgrader.utils import parse_utc

    try:
        stamp = (folder / "timestamp.txt").read_text("utf-8").strip()
    except OSError:
        stamp = folder.name.split("+", 2)[2]
    return parse_utc(stamp).replace(tzinfo=UTC)


def submit_exam_work(
    layout: CourseLayout, assignment: str, student: str, work_dir: Path
) -> Receipt:
    """Submit ``work_dir/<course_id>/<assignment>`` for ``student``; return the receipt.

    Checks nothing of the exam's timing: call :func:`plan_exam_submit` first.

    Raises
    ------
    CoursehubError
        ``work_dir`` is not a folder, or nbgrader's submit failed (nothing
        saved, limits, inbound missing), naming the assignment, course and student.
    """
    if not work_dir.is_dir():
        raise CoursehubError(
            f"{assignment} of {layout.course_id} by {student}: no work folder {work_dir}"
        )
    submit_assignment(layout.exchange_root, layout.course_id, assignment, student, work_dir)
    folder = newest_submission(layout, assignment, student)
    files = digest_folder(folder)
    return Receipt(_submission_time(folder), folder.name, manifest_sha256(files), files)


def submit_exam(
    layout: CourseLayout,
    assignment: str,
    sitting: Sitting,
    work_dir: Path,
    now: datetime,
    timezone: str,
    bell: bool = False,
) -> Receipt:
    """Submit a student's saved exam work if their sitting allows it now; return the receipt.

    Raises
    ------
    LateExamSubmissionError
        After the student's end (unless ``bell``), after the bell's
        submission, or before they started; the message says why and
        names the receipt of what was taken.
    CoursehubError
        As :func:`submit_exam_work`.
    """
    why = plan_exam_submit(sitting, now, timezone, bell)
    if why:
        where = f"{assignment} of {layout.course_id} by {sitting.username}"
        raise LateExamSubmissionError(f"{where}: {why}")
    return submit_exam_work(layout, assignment, sitting.username, work_dir)


def verify_collected(layout: CourseLayout, assignment: str, student: str, receipt: Receipt) -> str:
    """Return how the collected folder of ``student`` differs from ``receipt`` (``""``: same)."""
    folder = layout.course_dir / "submitted" / student / assignment
    if not folder.is_dir():
        return f"{student}: not collected"
    files = digest_folder(folder)
    if manifest_sha256(files) == receipt.sha256:
        return ""
    changed = sorted(set(files) ^ set(receipt.files)) or sorted(
        name for name in files if files[name] != receipt.files.get(name)
    )
    return f"{student}: collected files differ from the receipt ({', '.join(changed)})"
