"""How much a submission may hold: nbgrader's size limits plus a number of files.

nbgrader limits a copied folder with ``CourseDirectory.max_dir_size`` and
``CourseDirectory.max_file_size`` (kilobytes, default 100000: 100 MB;
``nbgrader/coursedir.py``), checked only while copying: its submit then
fails with a Python traceback (``RuntimeError: Directory size is too big``),
and a folder of many small files is accepted and makes every later step
slow: nbgrader's ``find_all_files`` runs one ``glob`` per file
(``nbgrader/utils.py`` ``is_ignored``), quadratic in the number of files,
and an autograde spent its whole time limit there (jupyter/nbgrader#874).

:func:`check_folder` measures a folder once, before anything is copied or
run, and returns one line naming the limit passed, the option that sets it
and what to remove. Submit (:class:`coursehub.grading.exchange.PrivateSubmit`),
collect (:class:`coursehub.grading.collect.VerifiedCollect`) and autograde
(:func:`coursehub.grading.autograde.job.check_submission`) refuse such a
submission with it; the others are unaffected.
"""

from __future__ import annotations

import filecmp
import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: nbgrader's default ``CourseDirectory.max_dir_size`` and ``max_file_size`` (kilobytes).
NBGRADER_MAX_SIZE_KB = 100000
#: Most files a submission may hold (``PrivateSubmit.max_files``; nbgrader has no such limit).
DEFAULT_MAX_FILES = 1000
#: nbgrader's default ``CourseDirectory.ignore``: never submitted, never counted.
NBGRADER_IGNORE = (".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback")


@dataclass(frozen=True)
class SubmissionLimits:
    """The limits of one submitted folder.

    ``max_dir_size`` and ``max_file_size`` in kilobytes of 1000 bytes, as
    nbgrader's options of the same names; ``max_files``: regular files,
    those ignored by ``CourseDirectory.ignore`` not counted.
    """

    max_dir_size: int = NBGRADER_MAX_SIZE_KB
    max_file_size: int = NBGRADER_MAX_SIZE_KB
    max_files: int = DEFAULT_MAX_FILES


def limits_of(coursedir: Any, config: Any) -> SubmissionLimits:
    """Return the limits an nbgrader app is configured with (its ``CourseDirectory``).

    ``max_files`` is read from the ``PrivateSubmit`` section of ``config``
    (a traitlets ``Config``), :data:`DEFAULT_MAX_FILES` when unset.
    """
    section = config.get("PrivateSubmit", {}) if config is not None else {}
    max_files = int(section.get("max_files", DEFAULT_MAX_FILES))
    return SubmissionLimits(int(coursedir.max_dir_size), int(coursedir.max_file_size), max_files)


def render_limits_config(limits: SubmissionLimits | None = None) -> list[str]:
    """Return the ``nbgrader_config.py`` lines setting ``limits`` (pure)."""
    limits = limits or SubmissionLimits()
    return [
        "# what a submission may hold (kB of 1000 bytes; files): coursehub.grading.limits",
        f"c.CourseDirectory.max_dir_size = {limits.max_dir_size}",
        f"c.CourseDirectory.max_file_size = {limits.max_file_size}",
        f"c.PrivateSubmit.max_files = {limits.max_files}",
    ]


def human_size(n_bytes: float) -> str:
    """Return ``n_bytes`` in decimal units, as nbgrader's limits: ``2.1 GB``, ``100 MB`` (pure)."""
    for unit in ("B", "kB", "MB", "GB"):
        if n_bytes < 1000 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.3g} {unit}"
        n_bytes /= 1000
    return f"{n_bytes:.3g} TB"  # pragma: no cover


@dataclass(frozen=True)
class FolderUse:
    """What a folder holds: regular ``files`` and their ``size`` (bytes), counted until a limit.

    ``largest``: ``(relative path, bytes)`` of the largest file; ``crowded``:
    ``(relative folder, files)`` of the folder holding most files directly;
    ``stopped``: the walk stopped once ``files`` passed the limit.
    """

    files: int
    size: int
    largest: tuple[str, int]
    crowded: tuple[str, int]
    stopped: bool = False


def measure_folder(
    folder: str | os.PathLike[str],
    max_files: int,
    ignore: Sequence[str] = NBGRADER_IGNORE,
    skip: Callable[[str], bool] | None = None,
) -> FolderUse:
    """Return what ``folder`` holds, symbolic links and names matching ``ignore`` left out.

    ``skip(relative path)`` leaves out more files (an unchanged copy of a
    released file). Stops after ``max_files + 1`` files, so a million
    files cost no more than the limit.
    """
    files = size = 0
    largest, crowded = ("", 0), ("", 0)
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not _ignored(d, ignore)]
        rel_dir = os.path.relpath(dirpath, folder)
        here = 0
        for name in filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if _ignored(name, ignore) or os.path.islink(path) or (skip and skip(rel)):
                continue
            n_bytes = os.lstat(path).st_size
            files, size, here = files + 1, size + n_bytes, here + 1
            largest = max(largest, (rel, n_bytes), key=lambda item: item[1])
            if files > max_files:
                return FolderUse(files, size, largest, max(crowded, (rel_dir, here)), True)
        crowded = max(crowded, (rel_dir, here), key=lambda item: item[1])
    return FolderUse(files, size, largest, crowded)


def _ignored(name: str, ignore: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in ignore)


def check_folder(
    folder: str | os.PathLike[str],
    limits: SubmissionLimits,
    ignore: Sequence[str] = NBGRADER_IGNORE,
    skip: Callable[[str], bool] | None = None,
) -> str | None:
    """Return why ``folder`` is over ``limits`` (one line), or None when it is within them.

    The message names the limit and its option, and the file or folder to
    remove: ``holds 20000 files or more, over the limit of 1000 files
    (PrivateSubmit.max_files): most are in many/ (remove it or move it out
    of the assignment folder)``. A single file over ``max_file_size`` is
    refused too (nbgrader would leave it out with a warning in its log,
    and the notebook reading it would fail at grading).
    """
    use = measure_folder(folder, limits.max_files, ignore, skip)
    where = "move it out of the assignment folder or remove it"
    if use.stopped:
        name = use.crowded[0]
        place = f"most are in {name}/" if name != "." else "most are at its top level"
        return (
            f"holds more than {limits.max_files} files, over the limit of {limits.max_files} "
            f"files (PrivateSubmit.max_files): {place} ({where})"
        )
    if use.largest[1] > 1000 * limits.max_file_size:
        name, n_bytes = use.largest
        return (
            f"holds {name} of {human_size(n_bytes)}, over the limit of "
            f"{human_size(1000 * limits.max_file_size)} per file "
            f"(CourseDirectory.max_file_size) ({where})"
        )
    if use.size > 1000 * limits.max_dir_size:
        name, n_bytes = use.largest
        return (
            f"holds {human_size(use.size)}, over the limit of "
            f"{human_size(1000 * limits.max_dir_size)} (CourseDirectory.max_dir_size): "
            f"the largest file is {name} of {human_size(n_bytes)} ({where})"
        )
    return None


def unchanged_release_files(src: Path, release: Path) -> Callable[[str], bool]:
    """Return ``is_unchanged(relative path)``: a file other than a notebook, as released.

    As released: the released copy (``release / path``) has the same size
    and modification time (nbgrader's fetch copies with ``copy2``), else the
    same content (:func:`filecmp.cmp`). Notebooks are always submitted.
    """

    def is_unchanged(rel: str) -> bool:
        released = release / rel
        if rel.endswith(".ipynb") or released.is_symlink() or not released.is_file():
            return False
        try:
            return filecmp.cmp(src / rel, released, shallow=True)
        except OSError:
            return False

    return is_unchanged


#: Size from which a file shipped with an assignment is named at generate (bytes).
LARGE_SHIPPED_BYTES = 10 * 2**20
#: Copies nbgrader still makes per student of a file shipped with an assignment:
#: the student's fetched copy, ``autograded/`` (autograde puts the source's copy
#: back, ``nbgrader/converters/autograde.py``) and ``feedback/``; ``submitted/``
#: is spared (:func:`unchanged_release_files`).
COPIES_PER_STUDENT = 3


def large_shipped_files(source_dir: Path, threshold: int = LARGE_SHIPPED_BYTES) -> list[str]:
    """Return one line per file of ``source_dir`` (not a notebook) of ``threshold`` bytes or more.

    Each line names the file, its size and what nbgrader does with it
    (:data:`COPIES_PER_STUDENT` copies per student, jupyter/nbgrader#1414) and
    where it belongs instead: the course data folder, which every student of
    the course reads and nobody copies (docs/course-data.md). A missing
    folder gives no line.
    """
    lines = []
    for path in sorted(source_dir.rglob("*")) if source_dir.is_dir() else []:
        if path.suffix == ".ipynb" or not path.is_file() or path.is_symlink():
            continue
        size = path.stat().st_size
        if size >= threshold:
            lines.append(
                f"{path.relative_to(source_dir)} ({size / 2**20:.0f} MiB) is copied "
                f"{COPIES_PER_STUDENT} times per student (fetched copy, autograded/, "
                f"feedback/: {COPIES_PER_STUDENT * size / 2**20:.0f} MiB each); put it in the "
                "course data folder and read it from there (docs/course-data.md)"
            )
    return lines
