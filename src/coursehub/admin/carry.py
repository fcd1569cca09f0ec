"""A course copy or a year rollover with the assignment sources, all or nothing.

The catalog rows are written first (flushed: every refusal comes before any
file), then each copied course's nbgrader ``source/`` folder (nbgrader's
"source" directory, ``CourseDirectory.source_directory``, in the layout of
:mod:`coursehub.grading.layout`) is copied into the new course's directory,
then the transaction commits. If a copy or the commit fails, the folders
copied so far are removed and the transaction is rolled back. Nothing of
``release/``, ``submitted/``, ``autograded/``, ``feedback/`` nor the gradebook
is copied: released nothing, students and grades never.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from coursehub.catalog.admin import get_open_year
from coursehub.catalog.courses import get_course, get_portal, get_year
from coursehub.catalog.models.courses import Course
from coursehub.catalog.rollover import CopyStep, copy_course, rollover
from coursehub.errors import UsageError
from coursehub.grading.layout import CourseLayout, layout_from_env, secure_course

#: nbgrader's ``CourseDirectory.source_directory`` default.
SOURCE_DIR = "source"

LayoutFor = Callable[[str], CourseLayout]


@dataclass(frozen=True)
class SourceCopy:
    """The source folder of a course and where its copy goes."""

    source: Path
    target: Path


def plan_source_copies(
    pairs: Iterable[tuple[str, str]], layout_for: LayoutFor = layout_from_env
) -> list[SourceCopy]:
    """Return the folders to copy for ``(old course_id, new course_id)`` pairs.

    Courses without a ``source/`` folder have nothing to copy. Raises
    :class:`UsageError` if a new course's ``source/`` already exists (a
    leftover of an older course with the same id): nothing is copied then.
    """
    copies = []
    for old, new in pairs:
        source = layout_for(old).course_dir / SOURCE_DIR
        target = layout_for(new).course_dir / SOURCE_DIR
        if not source.is_dir():
            continue
        if target.exists():
            raise UsageError(f"course {new}: {target} already exists; move it away to copy {old}")
        copies.append(SourceCopy(source, target))
    return copies


def apply_source_copies(copies: list[SourceCopy]) -> list[Path]:
    """Copy each source folder (symbolic links stay links, never followed); return the new
    folders. On an error, remove those already made and raise :class:`UsageError`."""
    made: list[Path] = []
    try:
        for copy in copies:
            copy.target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            made.append(copy.target)
            shutil.copytree(copy.source, copy.target, symlinks=True)
    except OSError as exc:
        remove_copies(made)
        raise UsageError(f"copying assignment sources: {exc}") from None
    return made


def remove_copies(made: Iterable[Path]) -> None:
    """Remove copied source folders (undoing :func:`apply_source_copies`)."""
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def all_or_nothing(
    session: Session, pairs: Callable[[], list[tuple[str, str]]], layout_for: LayoutFor
) -> Iterator[None]:
    """Run the block's catalog changes, copy the sources of ``pairs()``, commit; undo all on
    any error (rollback, copied folders removed)."""
    made: list[Path] = []
    try:
        yield
        made = apply_source_copies(plan_source_copies(pairs(), layout_for))
        for path in made:
            secure_course(layout_for(path.parent.name))
        session.commit()
    except BaseException:
        session.rollback()
        remove_copies(made)
        raise


def carry_course(
    session: Session,
    course_id: str,
    to_year: str,
    *,
    with_team: bool = False,
    layout_for: LayoutFor = layout_from_env,
) -> Course:
    """Copy a course to ``to_year`` with its sources and commit; return the new course."""
    new: list[Course] = []
    with all_or_nothing(session, lambda: [(course_id, new[0].course_id)], layout_for):
        course = get_course(session, course_id)
        target = get_open_year(session, to_year, f"copy {course_id} to it")
        new.append(copy_course(session, course, target, with_team=with_team))
    return new[0]


def carry_year(
    session: Session,
    from_year: str,
    to_year: str,
    *,
    portal: str | None = None,
    with_team: bool = False,
    dry_run: bool = False,
    layout_for: LayoutFor = layout_from_env,
) -> list[tuple[CopyStep, Course | None]]:
    """Roll ``from_year`` (``portal`` only, if given) over to ``to_year`` with the sources and
    commit (``dry_run``: plan only, nothing written); idempotent."""
    steps: list[tuple[CopyStep, Course | None]] = []

    def pairs() -> list[tuple[str, str]]:
        return [(s.source, s.target) for s, new in steps if new is not None]

    with all_or_nothing(session, pairs, layout_for):
        source, target = get_year(session, from_year), get_year(session, to_year)
        chosen = get_portal(session, portal) if portal else None
        steps = rollover(
            session, source, target, portal=chosen, with_team=with_team, dry_run=dry_run
        )
        if dry_run:
            session.rollback()
    return steps
