"""A course's declared requirements: PEP 508 lines only, checked before anything is built.

A teacher is trusted in their course only: the requirements may name
packages and versions from the site's configured index, nothing else. pip
options (``-e``, ``--index-url``, ``-r``...), URLs and local paths are
refused here, and the build installs wheels only (``--only-binary=:all:``) so
that no package runs code at install time (a wheel is unpacked, never
executed: PEP 427). A wheel's ``.pth`` file still runs at every start of the
environment's interpreter: the build runs in the sandbox and never starts
that interpreter as root (:mod:`coursehub.courseenv.build`).
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement

from coursehub.errors import UsageError
from coursehub.material.layout import MaterialLayout
from coursehub.material.publish import read_published_file

#: Most requirement lines a course may declare.
MAX_REQUIREMENTS = 200


def parse_requirements(text: str, where: str) -> list[str]:
    """Return the normalised requirement lines of ``text`` (pure).

    Blank lines and ``#`` comments are skipped; each other line must be a
    PEP 508 requirement without URL (``numpy>=1.26``, ``scikit-learn==1.5.*``,
    ``torch; sys_platform == "linux"``).

    Raises
    ------
    UsageError
        Naming ``where`` and the line number: a pip option, a URL or path,
        an invalid requirement, a package named twice, or more than
        :data:`MAX_REQUIREMENTS` lines.
    """
    found: list[str] = []
    names: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        at = f"{where}, line {number}"
        if line.startswith("-"):
            raise UsageError(f"{at}: pip options are not allowed ({line.split()[0]})")
        if "://" in line or line.startswith((".", "/", "~")):
            raise UsageError(f"{at}: only package names from the index, not URLs or paths")
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            reason = (str(exc).splitlines() or ["invalid"])[0]  # packaging adds a caret line
            raise UsageError(f"{at}: not a requirement: {reason}") from None
        if requirement.url:
            raise UsageError(f"{at}: only package names from the index, not URLs or paths")
        key = requirement.name.lower().replace("_", "-").replace(".", "-")
        if key in names:
            raise UsageError(f"{at}: {requirement.name} is already named on line {names[key]}")
        names[key] = number
        found.append(str(requirement))
    if len(found) > MAX_REQUIREMENTS:
        raise UsageError(f"{where}: {len(found)} requirements, at most {MAX_REQUIREMENTS}")
    return found


def render_requirements(lines: list[str]) -> str:
    """Return a requirements file's text for ``lines`` (one a line, final newline)."""
    return "".join(f"{line}\n" for line in lines)


#: The file of a course's material that declares its environment (pip's usual name).
MATERIAL_REQUIREMENTS = "requirements.txt"


def material_requirements(layout: MaterialLayout, course_id: str) -> tuple[str, str] | None:
    """Return ``(text, where)`` of the ``requirements.txt`` at the root of the course's
    published material (the root of its sub-folder), or None when it has none.

    The published head is the last good material, what the students pull
    (:func:`coursehub.material.publish.read_published_file`).

    Raises
    ------
    coursehub.material.mirrortypes.MaterialError
        If the file is too large or not UTF-8.
    """
    found = read_published_file(layout, course_id, MATERIAL_REQUIREMENTS)
    if found is None:
        return None
    text, commit = found
    return text, f"{MATERIAL_REQUIREMENTS} of {course_id}'s material (commit {commit[:12]})"
