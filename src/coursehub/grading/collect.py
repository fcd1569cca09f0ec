"""nbgrader's collect and feedback release, made safe where students have their own Unix accounts.

nbgrader's collect (``nbgrader/exchange/default/collect.py``, 0.9) takes the
student id from the submission's *file name* (``student+assignment+time``),
only *warns* when the folder's owner is someone else
(``ExchangeCollect.check_owner``), and copies with ``shutil.copytree``,
which follows symbolic links: a student could submit as a classmate, or
plant a link to a classmate's collected notebook (or the gradebook) and get
it copied, graded and sent back as feedback. :class:`VerifiedCollect`:

* skips (and reports in :attr:`VerifiedCollect.rejected`) a submission whose
  folder is not owned by the Unix account of the student it names (Unix
  names must equal hub usernames, as nbgrader assumes), unless
  ``check_owner`` is off (``COURSEHUB_GRADING_SINGLE_USER``: every server
  runs as one Unix user and nothing on disk can tell students apart; there
  only the hub's identity, :mod:`coursehub.grading.exchange`, protects);
* skips a submission that is a symbolic link or holds one, and one over
  the limits of :mod:`coursehub.grading.limits` (too large, too many files);
* copies without following links, through a descriptor opened with
  ``O_NOFOLLOW``, and drops any link that appears while copying;
* picks each student's newest valid submission (before the due date with
  ``before_duedate``), grouping by student correctly (nbgrader groups an
  unsorted list with ``itertools.groupby``);
* follows the assignment's after-due rule
  (:data:`coursehub.grading.latepolicy.AFTER_DUE`): ``keep_on_time`` collects
  as ``before_duedate`` does, ``refuse`` skips (and reports) every
  submission made after the due date (jupyter/nbgrader#1171).

nbgrader's release of feedback copies the course's feedback file with its
mode (now private), so :class:`PrivateReleaseFeedback` gives each released
file to its student (owner, 0o600) when run as root and the student has a
Unix account, else 0o644 as nbgrader does (the file is then protected by
its unguessable name, a hash of the submission's secret, in an unlistable
0o711 directory).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import stat
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import ignore_patterns, notebook_hash

from coursehub.grading.limits import check_folder, limits_of
from coursehub.grading.receipts import keep_receipt, receipt_dir, restore_receipt


def plan_newest(
    records: Iterable[dict[str, Any]], duedate: datetime | None = None
) -> list[dict[str, Any]]:
    """Return each student's submission to collect, students sorted (pure).

    ``records`` are nbgrader's ``{"username", "filename", "timestamp"}``.
    The newest per student; with ``duedate``, the newest on time if there
    is one (nbgrader's ``before_duedate``).
    """
    by_student: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_student.setdefault(record["username"], []).append(record)
    chosen = []
    for student in sorted(by_student):
        newest_first = sorted(by_student[student], key=lambda r: r["timestamp"], reverse=True)
        on_time = [r for r in newest_first if duedate is not None and r["timestamp"] <= duedate]
        chosen.append(on_time[0] if on_time else newest_first[0])
    return chosen


def check_submission(path: Path, student_id: str, check_owner: bool) -> str | None:
    """Return why the inbound submission ``path`` is refused, or None if it may be collected."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "is not a folder (a symbolic link?)"
    if check_owner:
        try:
            expected = pwd.getpwnam(student_id).pw_uid
        except KeyError:
            return f"names student {student_id}, who has no Unix account here"
        if st.st_uid != expected:
            try:
                owner = pwd.getpwuid(st.st_uid).pw_name
            except KeyError:
                owner = f"uid {st.st_uid}"
            return f"names student {student_id} but belongs to {owner}: forged"
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            if os.path.islink(os.path.join(dirpath, name)):
                return f"holds a symbolic link ({name})"
    return None


class VerifiedCollect(ExchangeCollect):
    """nbgrader's collect, keeping only submissions that belong to the student they name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: ``(inbound folder name, reason)`` of each submission skipped.
        self.rejected: list[tuple[str, str]] = []

    def init_src(self) -> None:
        super().init_src()  # checks the course and reads the due date
        student = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
        records = []
        for name in sorted(glob.glob(pattern)):
            record = self._path_to_record(name)
            check_owner = bool(getattr(self, "check_owner", True))
            reason = check_submission(Path(name), record["username"], check_owner)
            reason = reason or check_folder(name, limits_of(self.coursedir, self.config))
            if reason is None:
                records.append(record)
            else:
                self.rejected.append((record["filename"], reason))
                self.log.warning("Skipping submission %s: it %s", record["filename"], reason)
        records = self.select_records(records)
        after_due = self._after_due()
        if after_due == "refuse" and self.duedate is not None:
            records = self._drop_late(records, self.duedate)
        keep_on_time = self.before_duedate or after_due == "keep_on_time"
        self.src_records = plan_newest(records, self.duedate if keep_on_time else None)
        self.check_owner = False  # done above; nbgrader's check would only warn again

    def select_records(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the valid submissions that may be collected: all of them here (a hook for
        :class:`coursehub.grading.examcollect.ExamCollect`, which keeps the receipted ones)."""
        return records

    def _after_due(self) -> str:
        """The assignment's after-due rule, from the course directory's policies."""
        from coursehub.grading.latepolicy import LatePolicy, read_late_policies

        policies = read_late_policies(Path(self.coursedir.root))
        return policies.get(self.coursedir.assignment_id, LatePolicy()).after_due

    def _drop_late(self, records: list[dict[str, Any]], due: datetime) -> list[dict[str, Any]]:
        """Keep the submissions made by ``due``; report the others as rejected."""
        kept = []
        for record in records:
            if record["timestamp"] <= due:
                kept.append(record)
                continue
            reason = f"was made after the hard deadline ({due:%Y-%m-%d %H:%M} UTC)"
            self.rejected.append((record["filename"], reason))
            self.log.warning("Skipping submission %s: it %s", record["filename"], reason)
        return kept

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:
        """Copy ``src`` without following a symbolic link anywhere, then drop any link."""
        try:
            fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            self.rejected.append((os.path.basename(src), f"cannot be opened: {exc.strerror}"))
            self.log.warning("Skipping submission %s: %s", src, exc.strerror)
            return
        try:
            root = f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else src
            if self.get_size(root) > 1000 * self.coursedir.max_dir_size:
                raise RuntimeError(f"Directory size is too big: {src}")
            cdir = self.coursedir
            ignore = ignore_patterns(
                exclude=cdir.ignore,
                include=cdir.include,
                max_file_size=cdir.max_file_size,
                log=self.log,
            )
            shutil.copytree(root, dest, symlinks=True, ignore=ignore)
        finally:
            os.close(fd)
        for dirpath, dirnames, filenames in os.walk(dest):
            for name in (*dirnames, *filenames):
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    self.log.warning("Dropped symbolic link %s from a submission", path)
                    os.unlink(path)
        folder = Path(dest)  # submitted/<student>/<assignment>
        keep_receipt(
            folder, receipt_dir(Path(self.coursedir.root), folder.name, folder.parent.name)
        )


class PrivateReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's feedback release; each released file readable by its student only."""

    def copy_files(self) -> None:
        self.restore_receipts()
        super().copy_files()
        for html in glob.glob(os.path.join(self.src_path, "*.html")):
            folder = Path(html).parent
            student_id = folder.parent.name
            if not (folder / "submission_secret.txt").is_file():
                continue  # excluded by restore_receipts: nothing was released
            secret = (folder / "submission_secret.txt").read_text()
            checksum = notebook_hash(secret=secret, notebook_id=Path(html).stem)
            released = Path(self.dest_path) / f"{checksum}.html"
            if released.is_file():
                give_to_student(released, student_id)

    def restore_receipts(self) -> None:
        """Put back each feedback folder's missing secret and time; exclude who has none.

        See :mod:`coursehub.grading.receipts`: without them nbgrader's
        release would stop at that folder, for every student after it.
        """
        excluded = [s for s in (self.coursedir.student_id_exclude or "").split(",") if s]
        for html in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
            folder = Path(html).parent
            student_id, assignment = folder.parent.name, folder.name
            receipt = receipt_dir(Path(self.coursedir.root), assignment, student_id)
            missing = restore_receipt(folder, receipt)
            if missing and student_id not in excluded:
                excluded.append(student_id)
                self.log.warning(
                    "No feedback released to %s for %s: the submission has no %s "
                    "(collect it again)",
                    student_id,
                    assignment,
                    " nor ".join(missing),
                )
        self.coursedir.student_id_exclude = ",".join(excluded)


def give_to_student(path: Path, student_id: str) -> None:
    """Make ``path`` readable by ``student_id`` only (root), else by anyone who knows its name."""
    try:
        uid = pwd.getpwnam(student_id).pw_uid if os.geteuid() == 0 else None
    except KeyError:
        uid = None
    if uid is not None and uid != 0:
        os.chown(path, uid, -1, follow_symlinks=False)
        os.chmod(path, 0o600, follow_symlinks=False)
    else:
        os.chmod(path, 0o644, follow_symlinks=False)
