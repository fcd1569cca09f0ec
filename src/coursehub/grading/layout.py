"""Where a course's grading lives: its course directory, its ``nbgrader_config.py``, the exchange.

Layout (nbgrader 0.9 "Using nbgrader with JupyterHub", one course directory
per course and one shared exchange with ``path_includes_course``)::

    COURSES_ROOT/<course_id>/            the course directory (CourseDirectory.root),
                                         0o700, or 0o2770 with the team's Unix group
        nbgrader_config.py               course_id, root, exchange (render_course_config)
        gradebook.db                     nbgrader's gradebook (SQLite)
        source/ release/ submitted/ autograded/ feedback/
        coursehub/                       autograde reports (JSON)
    EXCHANGE_ROOT/                       0o1777: writable by all, sticky
        <course_id>/                     0o755, owned by the course's grader account
            outbound/                    0o755: released assignments, readable by all
            inbound/                     0o3733: students drop submissions, cannot list
            feedback/                    0o711: feedback files under unguessable names
            fetched/                     0o1733: one marker per fetch (coursehub's addition)

Permissions (nbgrader#1225): nbgrader's exchange root is 0o777 (every
student writes there, ``Exchange.ensure_root``); here it also has the sticky
bit (0o1777, like ``/tmp``), so nobody deletes or renames another's entries;
a course's directory belongs to its grader, its ``inbound`` is write-only for
students (0o2733, nbgrader's) plus sticky: nobody lists, removes or replaces
another's submission. nbgrader makes a submission folder 0o777, hidden by an
unlistable parent and a random suffix; coursehub's submit
(:class:`coursehub.grading.exchange.PrivateSubmit`) makes it 0o770 with
0o640 files, readable through the inbound's group.

Everything in the course directory (solutions, submissions, feedback, the
gradebook) is for the teaching team only: :func:`secure_course` sets the
modes of :mod:`coursehub.grading.perms` after each step, and collect checks
that each submission belongs to the student it names
(:class:`coursehub.grading.collect.VerifiedCollect`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.grading.limits import render_limits_config
from coursehub.grading.perms import (
    FORMGRADER_GROUP_PREFIX,
    CourseModes,
    group_id,
    plan_course_modes,
    resolve_grading_group,
    secure_tree,
)

DEFAULT_EXCHANGE_ROOT = "/usr/local/share/nbgrader/exchange"
#: Default parent of the course directories.
DEFAULT_COURSES_ROOT = "/srv/nbgrader/courses"
#: nbgrader's default per-cell execution timeout in seconds (``c.Execute.timeout``).
DEFAULT_EXECUTE_TIMEOUT_S = 30

#: coursehub's nbgrader exchange classes (``c.ExchangeFactory``).
COLLECT_CLASS = "coursehub.grading.collect.VerifiedCollect"
RELEASE_FEEDBACK_CLASS = "coursehub.grading.collect.PrivateReleaseFeedback"
#: The function whose config sandboxes every autograde that reads the course's config.
SANDBOX_CONFIG = "coursehub.grading.sandbox.kernel.course_sandbox_config"
INTEGRITY_CONFIG = "coursehub.grading.autograde.integrity.course_integrity_config"
#: The late-penalty plugin following each assignment's policy (coursehub.grading.latepolicy).
LATE_PENALTY_CLASS = "coursehub.grading.latepolicy.CourseLatePenalty"

#: Mode of each exchange directory, relative to the exchange root ("" is the root).
EXCHANGE_MODES: dict[str, int] = {
    "": 0o1777,
    "{course_id}": 0o755,
    "{course_id}/outbound": 0o755,
    "{course_id}/inbound": 0o3733,
    "{course_id}/feedback": 0o711,
    "{course_id}/fetched": 0o1733,
}


@dataclass(frozen=True)
class CourseLayout:
    """The grading paths of one course.

    Attributes
    ----------
    course_id
        nbgrader's course id (``Course.course_id``, e.g. ``"mlmeca-2025"``).
    course_dir
        The course directory (``CourseDirectory.root``).
    exchange_root
        The shared exchange root (``Exchange.root``).
    execute_timeout_s
        Seconds one cell may run while autograding (``c.Execute.timeout``).
    single_user
        True when every account runs as one Unix user (the demo, the
        tests): collect then skips nbgrader's owner check
        (``ExchangeCollect.check_owner``), which would flag every submission.
    grading_group
        Unix group of the course's teaching team (None: owner-only files),
        see :func:`coursehub.grading.perms.resolve_grading_group`.
    """

    course_id: str
    course_dir: Path
    exchange_root: Path
    execute_timeout_s: int = DEFAULT_EXECUTE_TIMEOUT_S
    single_user: bool = False
    grading_group: str | None = None

    @property
    def config_path(self) -> Path:
        """The course's ``nbgrader_config.py``."""
        return self.course_dir / "nbgrader_config.py"

    @property
    def db_url(self) -> str:
        """The gradebook's SQLAlchemy URL (nbgrader's default place)."""
        return f"sqlite:///{self.course_dir / 'gradebook.db'}"

    @property
    def reports_dir(self) -> Path:
        """Where coursehub keeps autograde reports of this course."""
        return self.course_dir / "coursehub"

    @property
    def gradebook_path(self) -> Path:
        """The gradebook's file."""
        return self.course_dir / "gradebook.db"

    @property
    def fetched_dir(self) -> Path:
        """Where fetches of this course's assignments are recorded."""
        return self.exchange_root / self.course_id / "fetched"


def make_layout(
    course_id: str,
    courses_root: str | Path = DEFAULT_COURSES_ROOT,
    exchange_root: str | Path = DEFAULT_EXCHANGE_ROOT,
    **options: object,
) -> CourseLayout:
    """Return the layout of ``course_id``: ``courses_root/course_id`` and the shared exchange.

    ``grading_group``, when not given, is the team's Unix group of
    :func:`coursehub.grading.perms.resolve_grading_group` (from the
    environment), so that every layout of a course sets the same modes: one
    made without it would make the directory owner-only again and shut the
    course's formgrader account out.

    Raises
    ------
    UsageError
        If ``course_id`` could escape its directory or break nbgrader's
        ``student+assignment+timestamp`` submission names, or if
        ``COURSEHUB_GRADING_GROUP`` names a group that does not exist.
    """
    check_name(course_id, "course id")
    if "grading_group" not in options:
        options["grading_group"] = resolve_grading_group(course_id)
    root = Path(courses_root).expanduser().absolute()
    exchange = Path(exchange_root).expanduser().absolute()
    return CourseLayout(course_id, root / course_id, exchange, **options)  # type: ignore[arg-type]


def check_name(name: str, what: str) -> str:
    """Return ``name`` if it is a safe course id, assignment or student name; else UsageError."""
    bad = not name or name.startswith(".") or any(ch in name for ch in "/\\+* \t\n")
    if bad:
        raise UsageError(f"{what} {name!r} must be non-empty, without '/', '+', '*' or spaces")
    return name


def render_course_config(layout: CourseLayout) -> str:
    """Return the text of the course's ``nbgrader_config.py`` (pure).

    It sets ``CourseDirectory.course_id`` and ``.root``, the exchange root
    with ``path_includes_course``, ``Execute.timeout``, coursehub's collect
    and feedback classes, the sandboxed kernel (:data:`SANDBOX_CONFIG`),
    the source's cells (:data:`INTEGRITY_CONFIG`) and the submission limits
    (:mod:`coursehub.grading.limits`); the formgrader and ``nbgrader``
    commands run in the course directory read it.
    """
    sandbox_module, _, sandbox_function = SANDBOX_CONFIG.rpartition(".")
    integrity_module, _, integrity_function = INTEGRITY_CONFIG.rpartition(".")
    lines = [
        f"# nbgrader configuration of course {layout.course_id} (written by coursehub).",
        "c = get_config()  # noqa: F821",
        f"c.CourseDirectory.course_id = {layout.course_id!r}",
        f"c.CourseDirectory.root = {str(layout.course_dir)!r}",
        f"c.Exchange.root = {str(layout.exchange_root)!r}",
        "c.Exchange.path_includes_course = True",
        f"c.Execute.timeout = {int(layout.execute_timeout_s)}",
        "# collect: check owners, skip symlinks; feedback: readable by its student only",
        f"c.ExchangeFactory.collect = {COLLECT_CLASS!r}",
        f"c.ExchangeFactory.release_feedback = {RELEASE_FEEDBACK_CLASS!r}",
        "# late submissions: the penalty of the assignment's policy (course page)",
        f"c.AssignLatePenalties.plugin_class = {LATE_PENALTY_CLASS!r}",
        "# autograde from the formgrader or `nbgrader autograde` too: kernels in the sandbox",
        f"from {sandbox_module} import {sandbox_function}",
        f"c.merge({sandbox_function}(c.CourseDirectory.root, c.Exchange.root))",
        "# deleted or edited test cells: graded with the assignment's (nbgrader#1682)",
        f"from {integrity_module} import {integrity_function}",
        f"c.merge({integrity_function}())",
        *render_limits_config(),
    ]
    if layout.single_user:
        lines.append("# One Unix user for every account: the owner check would flag all.")
        lines.append("c.ExchangeCollect.check_owner = False")
    return "\n".join(lines) + "\n"


def plan_exchange_dirs(exchange_root: Path, course_id: str) -> list[tuple[Path, int]]:
    """Return ``(directory, mode)`` for the exchange of ``course_id``, parents first (pure)."""
    return [
        (exchange_root / rel.format(course_id=course_id) if rel else exchange_root, mode)
        for rel, mode in EXCHANGE_MODES.items()
    ]


def ensure_course(layout: CourseLayout) -> None:
    """Create the course directory, its config and its exchange directories (idempotent).

    Directories are created with the modes of :data:`EXCHANGE_MODES`
    (``chmod`` after ``mkdir``: the umask would otherwise drop bits); the
    config is written atomically; then :func:`secure_course` sets the
    course directory's modes (correcting an older installation). Raises
    :class:`UsageError` when a directory cannot be made (e.g. the exchange
    root needs an admin).
    """
    try:
        layout.course_dir.mkdir(parents=True, exist_ok=True)
        for directory, mode in plan_exchange_dirs(layout.exchange_root, layout.course_id):
            directory.mkdir(parents=True, exist_ok=True)
            if directory.stat().st_mode & 0o7777 != mode:
                os.chmod(directory, mode)
    except PermissionError as exc:
        raise UsageError(
            f"course {layout.course_id}: cannot create {exc.filename} "
            "(the exchange root is created once by an administrator)"
        ) from exc
    secure_course(layout)
    write_atomically(layout.config_path, render_course_config(layout))
    json_config = layout.course_dir / "nbgrader_config.json"
    if not json_config.is_file() or json_config.read_text().strip() != "{}":
        write_atomically(json_config, "{}\n")  # taken, empty: see perms.LOCKED_FILES
    ensure_gradebook(layout)
    secure_course(layout)


def ensure_gradebook(layout: CourseLayout) -> None:
    """Create the course's gradebook if it has no tables yet (idempotent).

    nbgrader runs ``alembic`` from ``PATH`` for it (failing outside the
    virtualenv); this makes nbgrader's tables in process, stamped with the
    head of ``nbgrader/alembic``, in a file made owner-only (or team-group) first.
    """
    import nbgrader
    from alembic.script import ScriptDirectory
    from nbgrader.api import Base
    from sqlalchemy import create_engine, inspect, text

    from coursehub.filemodes import ensure_private_sqlite

    layout.course_dir.mkdir(parents=True, exist_ok=True)
    modes = course_modes(layout)
    # before SQLite creates it with the umask (its journal gets the same mode)
    ensure_private_sqlite(layout.gradebook_path, modes.file_mode, modes.gid)
    engine = create_engine(layout.db_url)
    try:
        if inspect(engine).get_table_names():
            return
        scripts = ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic"))
        with engine.begin() as connection:
            Base.metadata.create_all(connection)
            connection.execute(
                text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            )
            connection.execute(
                text("INSERT INTO alembic_version (version_num) VALUES (:head)"),
                {"head": scripts.get_current_head()},
            )
    finally:
        engine.dispose()


def course_modes(layout: CourseLayout) -> CourseModes:
    """Return the modes of ``layout``'s course directory (with its group's gid, if any).

    Raises :class:`UsageError` if ``layout.grading_group`` is not a Unix group.
    """
    if layout.grading_group is None:
        return plan_course_modes(formgrader_gid(layout.course_dir))
    gid = group_id(layout.grading_group)
    if gid is None:
        raise UsageError(
            f"course {layout.course_id}: no Unix group {layout.grading_group!r} on this host"
        )
    return plan_course_modes(gid)


def formgrader_gid(course_dir: Path) -> int | None:
    """Return the gid of the course directory's group if it is its formgrader's, else None.

    A course without a team group whose formgrader runs as its own account
    has that account's group (``fg-...``,
    :data:`coursehub.grading.perms.FORMGRADER_GROUP_PREFIX`): every later
    :func:`secure_course` keeps it, whoever made the layout.
    """
    import grp

    try:
        gid = course_dir.stat().st_gid
        name = grp.getgrgid(gid).gr_name
    except (OSError, KeyError):
        return None
    return gid if name.startswith(FORMGRADER_GROUP_PREFIX) else None


def secure_course(layout: CourseLayout) -> None:
    """Give the course directory and everything in it its private mode (idempotent).

    Also gives the exchange's ``inbound`` the team's group, so that
    submissions (0o640 there, see ``PrivateSubmit``) are readable by the
    team and nobody else. Call it after each nbgrader step: nbgrader
    creates directories 0o777/0o755 and files 0o644. Raises
    :class:`UsageError` naming a path whose mode cannot be set.
    """
    modes = course_modes(layout)
    layout.course_dir.mkdir(parents=True, exist_ok=True)
    secure_tree(layout.course_dir, modes)
    inbound = layout.exchange_root / layout.course_id / "inbound"
    if modes.gid is not None and inbound.is_dir() and inbound.stat().st_gid != modes.gid:
        try:
            os.chown(inbound, -1, modes.gid)
            os.chmod(inbound, EXCHANGE_MODES["{course_id}/inbound"])
        except PermissionError as exc:
            raise UsageError(f"cannot give {inbound} the group {layout.grading_group}") from exc


def assignment_warnings(layout: CourseLayout, assignment: str) -> list[str]:
    """Return why ``assignment`` cannot be released from ``layout`` yet, a line each ([]: it can).

    What an exam needs at its opening: the course's grading set up
    (``nbgrader_config.py``) and the assignment's source folder with at least
    one notebook (``source/<assignment>/*.ipynb``, nbgrader's layout). Pure
    but for reading the course directory.
    """
    course = layout.course_id
    if not layout.config_path.is_file():
        return [
            f"grading is not set up for {course} yet (coursehub grading setup {course}): "
            f"the exam's notebook {assignment} must be added before the exam opens"
        ]
    source = layout.course_dir / "source" / assignment
    if not source.is_dir() or not any(source.glob("*.ipynb")):
        return [
            f"{course} has no notebook for {assignment} yet ({source}): add it before the "
            f"exam opens (coursehub grading add {course} {assignment} NOTEBOOK.ipynb)"
        ]
    return []


def layout_from_env(course_id: str, environ: Mapping[str, str] | None = None) -> CourseLayout:
    """Return the layout of ``course_id`` from the environment.

    ``COURSEHUB_GRADING_COURSES`` (parent of the course directories, default
    :data:`DEFAULT_COURSES_ROOT`), ``COURSEHUB_GRADING_EXCHANGE`` (default
    :data:`DEFAULT_EXCHANGE_ROOT`), ``COURSEHUB_GRADING_EXECUTE_TIMEOUT``
    (seconds per cell, default 30), ``COURSEHUB_GRADING_SINGLE_USER``
    (``1``: every account is one Unix user, as in the demo) and
    ``COURSEHUB_GRADING_GROUP`` (the team's Unix group,
    :func:`coursehub.grading.perms.resolve_grading_group`).
    """
    env = os.environ if environ is None else environ
    timeout = env.get("COURSEHUB_GRADING_EXECUTE_TIMEOUT", str(DEFAULT_EXECUTE_TIMEOUT_S))
    if not timeout.isdigit() or int(timeout) < 1:
        raise UsageError(
            "COURSEHUB_GRADING_EXECUTE_TIMEOUT must be a whole number of seconds >= 1, "
            f"got {timeout!r}"
        )
    return make_layout(
        course_id,
        env.get("COURSEHUB_GRADING_COURSES", DEFAULT_COURSES_ROOT),
        env.get("COURSEHUB_GRADING_EXCHANGE", DEFAULT_EXCHANGE_ROOT),
        execute_timeout_s=int(timeout),
        single_user=env.get("COURSEHUB_GRADING_SINGLE_USER", "") in ("1", "true", "yes"),
        grading_group=resolve_grading_group(course_id, env),
    )
