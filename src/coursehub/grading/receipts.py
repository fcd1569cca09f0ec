"""The receipt of each collected submission: its secret and time, kept for feedback.

nbgrader names a student's released feedback after the submission's secret
(``submission_secret.txt``, ``nbgrader.utils.notebook_hash``) and reads the
submission's ``timestamp.txt`` at every step after collect. A teacher who
fixes a collected submission (jupyter/nbgrader#1712) by putting a folder of
their own in its place (the notebook only) leaves both out: nbgrader's
autograde then loses the submission time (and the late penalty), and its
release of feedback stops at the first such folder, for every student.

Collect (:class:`coursehub.grading.collect.VerifiedCollect`) keeps a copy
of both files per student and assignment, in the course directory (private
to the teaching team)::

    <course_dir>/coursehub/receipts/<assignment>/<student>/
        submission_secret.txt  timestamp.txt

Autograde puts back what a submitted folder lacks
(:func:`restore_receipts`), and so does the release of feedback for a
feedback folder (:class:`coursehub.grading.collect.PrivateReleaseFeedback`),
which skips, with a warning, a student whose receipt is lost too.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

#: The files of a submission that nbgrader needs after collect, and that a teacher's fix may drop.
RECEIPT_FILES = ("submission_secret.txt", "timestamp.txt")


def receipt_dir(course_dir: Path, assignment: str, student_id: str) -> Path:
    """Return where the receipt of ``student_id``'s collected ``assignment`` is kept (pure)."""
    return Path(course_dir) / "coursehub" / "receipts" / assignment / student_id


def keep_receipt(submission: Path, receipt: Path) -> None:
    """Copy the receipt files of the collected folder ``submission`` into ``receipt``.

    A file the submission lacks is left out (and an older copy removed):
    the receipt is always the last collected submission's.
    """
    receipt.mkdir(parents=True, exist_ok=True)
    for name in RECEIPT_FILES:
        source = submission / name
        if source.is_file() and not source.is_symlink():
            shutil.copyfile(source, receipt / name)
        else:
            (receipt / name).unlink(missing_ok=True)


def restore_receipt(folder: Path, receipt: Path) -> list[str]:
    """Put back into ``folder`` the receipt files it lacks; return the names still missing."""
    missing = []
    for name in RECEIPT_FILES:
        target = folder / name
        if target.is_file():
            continue
        if (receipt / name).is_file():
            shutil.copyfile(receipt / name, target)
        else:
            missing.append(name)
    return missing


def restore_receipts(course_dir: Path, assignment: str, students: Iterable[str]) -> None:
    """Put back the receipt files each student's submitted folder of ``assignment`` lacks."""
    for student_id in students:
        folder = Path(course_dir) / "submitted" / student_id / assignment
        if folder.is_dir():
            restore_receipt(folder, receipt_dir(course_dir, assignment, student_id))
