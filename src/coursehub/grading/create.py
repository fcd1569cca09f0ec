"""Creating an assignment from the course page: an uploaded notebook, or one from the material.

Everything a teacher sends is checked before anything is written
(:func:`check_notebook_upload`): the file name (a plain ``NAME.ipynb``, no
folder, no ``..``), its size (:data:`MAX_NOTEBOOK_BYTES`), that it is JSON
and a valid notebook (``nbformat.validate``), and that at least one cell
carries nbgrader metadata (made with nbgrader's "Create Assignment" tool).
The assignment name follows :func:`coursehub.grading.layout.check_name`.
The notebook is then added through
:func:`coursehub.grading.assignments.add_assignment` (staged in a temporary
folder and moved into place) with its due date, and the late-submission
policy is recorded (:mod:`coursehub.grading.latepolicy`); if that last step
fails, the assignment is removed again, so a failure leaves nothing.

Due dates are timezone-aware: a form's local date and time are read in the
chosen IANA zone (:mod:`zoneinfo`, :func:`coursehub.grading.deadline.localize`:
a time skipped or repeated by a daylight-saving change is refused) and
stored in UTC, as nbgrader stores them (``nbgrader.utils.parse_utc``: naive
datetimes in the gradebook are UTC); the zone is recorded with the policy,
so the course page shows the due date as it was typed. Creating an
assignment or changing its schedule publishes the course's deadlines to the
exchange (:func:`coursehub.grading.deadline.publish_deadlines`); a change of
schedule recomputes the late penalties already given
(:func:`coursehub.grading.deadline.reapply_late_penalties`).

The course's material folder is ``<course_dir>/material`` (a checkout of
the course's material repository, or notebooks put there by the team);
:func:`list_material_notebooks` lists its notebooks, never following a
symbolic link out of it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.grading.assignments import add_assignment, record_assignment
from coursehub.grading.deadline import (
    PenaltyChange,
    localize,
    publish_deadlines,
    reapply_late_penalties,
    zone_of,
)
from coursehub.grading.latepolicy import LatePolicy, save_late_policy
from coursehub.grading.layout import CourseLayout, check_name, secure_course

#: Largest notebook accepted, in bytes (below the app's 4 MiB request limit,
#: ``MAX_CONTENT_LENGTH`` in :mod:`coursehub.web.config`).
MAX_NOTEBOOK_BYTES = 3 * 1024 * 1024
#: Most notebooks listed from a material folder, and how deep it is searched.
MAX_MATERIAL_NOTEBOOKS = 500
MAX_MATERIAL_DEPTH = 4


def check_notebook_upload(filename: str, data: bytes, assignment: str) -> str:
    """Return the notebook's file name once ``data`` passes every check (pure).

    Raises
    ------
    UsageError
        Naming the assignment and the file: a name with a folder, ``..`` or
        not ending in ``.ipynb``; an empty or too large file; not UTF-8
        JSON; not a valid notebook; no nbgrader cell.
    """
    import nbformat
    from nbformat.warnings import MissingIDFieldWarning

    where = f"assignment {assignment}: file {filename!r}"
    name = filename.strip()
    if not name or "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise UsageError(f"{where}: give a plain file name NAME.ipynb, without folders")
    if not name.endswith(".ipynb"):
        raise UsageError(f"{where}: a notebook (.ipynb) is needed")
    if not data:
        raise UsageError(f"{where} is empty")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise UsageError(
            f"{where} is {len(data) / 2**20:.1f} MiB, above the limit of "
            f"{MAX_NOTEBOOK_BYTES / 2**20:g} MiB (clear its outputs and try again)"
        )
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{where} is not a notebook: not JSON ({exc})") from None
    try:
        with warnings.catch_warnings():
            # nbformat gives cells without an id (nbformat 4.5) one, as Jupyter does on save
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except Exception as exc:  # nbformat raises several kinds for a malformed notebook
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise UsageError(f"{where} is not a valid notebook: {first}") from None
    if not any("nbgrader" in cell.get("metadata", {}) for cell in notebook.cells):
        raise UsageError(
            f"{where} has no nbgrader cells (mark solution and autograder test cells "
            "with nbgrader's Create Assignment tool)"
        )
    return name


def parse_duedate(text: str, timezone: str) -> datetime | None:
    """Return the due date of a form, aware and in UTC; None when ``text`` is empty (pure).

    Parameters
    ----------
    text
        ``YYYY-MM-DDTHH:MM`` (an HTML ``datetime-local`` input), seconds
        allowed, read in ``timezone``.
    timezone
        An IANA zone name (``Europe/Paris``, ``UTC``).

    Raises
    ------
    UsageError
        For an unknown zone, a date that does not parse, or a wall-clock
        time that a daylight-saving change skips or repeats in that zone
        (:func:`coursehub.grading.deadline.localize`; an explicit offset,
        ``2025-10-26T02:30+01:00``, settles a repeated one).
    """
    zone_of(timezone)
    if not text.strip():
        return None
    try:
        local = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"due date {text!r}: expected YYYY-MM-DD HH:MM") from None
    return localize(local, timezone).astimezone(UTC)


@dataclass(frozen=True)
class NewAssignment:
    """What the course page's creation form asks for."""

    assignment: str
    duedate: datetime | None
    policy: LatePolicy
    timezone: str | None = None


def create_assignment(layout: CourseLayout, new: NewAssignment, filename: str, data: bytes) -> Path:
    """Check and add the notebook ``data`` as ``new.assignment``; record its due date and policy.

    Returns the assignment's source folder. Nothing is left behind when a
    check or a step fails.

    Raises
    ------
    UsageError
        See :func:`check_notebook_upload`; also a bad or taken assignment name.
    """
    check_name(new.assignment, "assignment name")
    name = check_notebook_upload(filename, data, new.assignment)
    with tempfile.TemporaryDirectory(prefix="coursehub-upload-") as staging:
        path = Path(staging) / name
        path.write_bytes(data)
        source = add_assignment(layout, new.assignment, [path], new.duedate)
    try:
        save_late_policy(layout, new.assignment, new.policy, new.timezone)
        publish_deadlines(layout)
    except BaseException:
        remove_new_assignment(layout, new.assignment, source)
        raise
    return source


def remove_new_assignment(layout: CourseLayout, assignment: str, source: Path) -> None:
    """Undo :func:`create_assignment`: its source folder and its gradebook entry."""
    from nbgrader.api import Gradebook

    shutil.rmtree(source, ignore_errors=True)
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.remove_assignment(assignment)


def set_schedule(
    layout: CourseLayout,
    assignment: str,
    duedate: datetime | None,
    policy: LatePolicy,
    timezone: str | None = None,
) -> list[PenaltyChange]:
    """Change an existing assignment's due date (typed in ``timezone``) and late policy.

    The deadlines are published again, and the late penalties of the
    submissions already graded are recomputed for the new date and policy,
    earlier or later (jupyter/nbgrader#723); returns those that changed.
    """
    record_assignment(layout, assignment, duedate)
    save_late_policy(layout, assignment, policy, timezone)
    changes = reapply_late_penalties(layout, assignment, policy)
    publish_deadlines(layout)
    secure_course(layout)
    return changes


def material_dir(layout: CourseLayout) -> Path:
    """Return the course's material folder (``<course_dir>/material``)."""
    return layout.course_dir / "material"


def list_material_notebooks(layout: CourseLayout) -> list[str]:
    """Return the notebooks of the material folder, as sorted ``/``-separated relative paths.

    Hidden entries, checkpoints and symbolic links are skipped; at most
    :data:`MAX_MATERIAL_NOTEBOOKS`, :data:`MAX_MATERIAL_DEPTH` folders deep.
    """
    root = material_dir(layout)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and not os.path.islink(os.path.join(dirpath, d))
            and depth < MAX_MATERIAL_DEPTH
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(".ipynb") and not name.startswith(".") and not path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)[:MAX_MATERIAL_NOTEBOOKS]


def read_material_notebook(layout: CourseLayout, relative: str) -> tuple[str, bytes]:
    """Return ``(file name, content)`` of a notebook listed by :func:`list_material_notebooks`.

    Raises
    ------
    UsageError
        If ``relative`` is not one of the listed notebooks (a path out of
        the folder, a link, a missing file), or it is too large.
    """
    if relative not in list_material_notebooks(layout):
        raise UsageError(
            f"course {layout.course_id}: {relative!r} is not a notebook of the material folder"
        )
    path = material_dir(layout) / relative
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UsageError(f"course {layout.course_id}: {relative!r} is not a plain file")
        data = handle.read(MAX_NOTEBOOK_BYTES + 1)
    return path.name, data
