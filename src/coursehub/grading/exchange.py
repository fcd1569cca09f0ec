"""The student's side of the exchange: fetch, submit, fetch feedback, and the recording fetch.

nbgrader's exchange names a submission after ``CourseDirectory.student_id``
when it is set (else after the Unix user). On the hub each student has a
server of their own and nbgrader finds their name; the functions below take
the student id explicitly, which is also how several students are
simulated under one Unix user (the demo, the tests).

:class:`RecordingFetchAssignment` is nbgrader's default fetch plus a marker
``<exchange>/<course_id>/fetched/<student>+<assignment>`` (an empty file in a
write-only directory), so that the course page can say who fetched. It is
enabled in the servers' global config
(:func:`coursehub.grading.studentconfig.render_student_config`), as is
:class:`PrivateSubmit`: nbgrader's submit leaves the submission folder 0o777
with 0o644 files; this one makes it 0o770 with 0o640 files (group: the
inbound's, i.e. the grader's), so only the grader and the submitting
student can read it. Before copying, it checks the assignment's published
deadline (:func:`coursehub.grading.deadline.plan_submit`): after a hard
deadline it refuses; a late submission that would replace an on-time one
(after-due rule ``accept``) is refused once with a warning, and goes ahead
when the student submits again within
:data:`coursehub.grading.deadline.CONFIRM_WINDOW_S` (the Lab's Submit
button and ``coursehub grading submit`` alike, jupyter/nbgrader#1171); the
line to tell the student is :attr:`PrivateSubmit.deadline_note`.

Who a student is comes from the caller: these functions trust their
``student_id`` (tests, the demo, an admin); the command line checks it
against the hub or Unix identity first (:mod:`coursehub.grading.cli`).
"""

from __future__ import annotations

import getpass
import os
import pwd
import shutil
import tempfile
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import ignore_patterns
from traitlets import Integer

from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.layout import check_name
from coursehub.grading.limits import (
    DEFAULT_MAX_FILES,
    SubmissionLimits,
    check_folder,
    unchanged_release_files,
)

#: Name prefix of the hidden folder a submission is written in before it is
#: renamed into the inbound (a leading dot: no ``student+assignment+*`` glob
#: of nbgrader's or coursehub's collect matches it).
STAGING_PREFIX = ".submitting-"


class RecordingFetchAssignment(ExchangeFetchAssignment):
    """nbgrader's fetch, then a fetch record in the course's ``fetched`` directory."""

    def copy_files(self) -> None:
        super().copy_files()
        record_fetch(
            Path(self.root),
            self.coursedir.course_id,
            self.coursedir.assignment_id,
            self.coursedir.student_id,
        )


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit: deadline rule, limits, no released data, atomic, then private.

    In order: the assignment's deadline rule (:meth:`check_deadline`); the
    folder against :mod:`coursehub.grading.limits` (nbgrader's
    ``max_dir_size`` and ``max_file_size``, and :attr:`max_files`), refused
    before anything is copied with one line naming the limit and what to
    remove (nbgrader#874). A file the student left as it was released (same
    size and modification time, else same content:
    :func:`coursehub.grading.limits.unchanged_release_files`) is not submitted: nbgrader's autograde
    puts the source's copy back ("Overwriting files with master versions",
    ``nbgrader/converters/autograde.py``), so a data file shipped with the
    assignment is not copied into the inbound, the student's nbgrader cache
    and ``submitted/`` (nbgrader#1414).

    nbgrader copies a submission straight into
    ``inbound/<student>+<assignment>+<time>``, so a collect that runs while
    many students submit at once (the end of an exam: nbgrader#919) can take
    a folder that is still being copied. Here the whole submission is first
    written under a hidden staging folder in the inbound (which no collect
    pattern matches) and then renamed into place in one ``rename(2)``: a
    collect sees either nothing or the complete submission, and a submit
    that fails midway leaves nothing in the inbound.
    """

    #: The warning for the student about this submission's deadline ("" when on time).
    deadline_note = ""

    max_files = Integer(
        DEFAULT_MAX_FILES, help="Most files a submitted folder may hold (nbgrader#874)."
    ).tag(config=True)

    def copy_files(self) -> None:
        self.check_deadline()
        self.init_release()  # sets release_path; nbgrader's copy_files does it again
        limits = SubmissionLimits(
            self.coursedir.max_dir_size, self.coursedir.max_file_size, self.max_files
        )
        self._unchanged = unchanged_release_files(Path(self.src_path), Path(self.release_path))
        problem = check_folder(self.src_path, limits, self.coursedir.ignore, self._unchanged)
        if problem:
            self.fail(f"{self.src_path} {problem}; nothing was submitted")
        inbound: str = self.inbound_path  # type: ignore[has-type]
        staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=inbound)
        self.inbound_path = staging
        try:
            super().copy_files()
            staged = Path(staging) / self.assignment_filename
            make_submission_private(staged)
            os.rename(staged, Path(inbound) / self.assignment_filename)
        finally:
            self.inbound_path = inbound
            shutil.rmtree(staging, ignore_errors=True)
        cache = Path(self.cache_path)
        if cache.is_dir() and cache.stat().st_uid == os.geteuid():
            os.chmod(cache, 0o700)

    def check_deadline(self) -> None:
        """Refuse (nbgrader's ``fail``) or note what the published deadline says of it."""
        from nbgrader.utils import parse_utc

        from coursehub.grading.deadline import decide_submit

        now = parse_utc(self.timestamp).replace(tzinfo=UTC)
        student = self.assignment_filename.split("+", 1)[0]
        decision = decide_submit(
            Path(self.root),
            self.coursedir.course_id,
            self.coursedir.assignment_id,
            student,
            now,
            Path(self.cache_path),
        )
        if decision is None:
            return
        if not decision.allowed:
            self.fail(decision.message)
        self.deadline_note = decision.message
        if decision.message:
            self.log.warning(decision.message)

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:
        """Copy as nbgrader does (its ``ignore_patterns``), leaving out unchanged released files.

        The sizes were checked by :meth:`copy_files`.
        """
        cdir = self.coursedir
        nbgrader_ignore = ignore_patterns(
            exclude=cdir.ignore,
            include=cdir.include,
            max_file_size=cdir.max_file_size,
            log=self.log,
        )

        def ignore(directory: str, names: list[str]) -> list[str]:
            left_out = set(nbgrader_ignore(directory, names))
            for name in names:
                rel = os.path.relpath(os.path.join(directory, name), src)
                if name not in left_out and self._unchanged(rel):
                    self.log.info("Not submitting %s: unchanged since its release", rel)
                    left_out.add(name)
            return sorted(left_out)

        shutil.copytree(src, dest, ignore=ignore)


def make_submission_private(folder: Path) -> None:
    """Give a submitted folder 0o770 (its subfolders too) and its files 0o640; links untouched.

    The folder was made in the inbound (set-group-id), so its entries carry
    the inbound's group: the grader's.
    """
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o640)
        os.chmod(dirpath, 0o770)


def record_fetch(exchange_root: Path, course_id: str, assignment: str, student_id: str) -> None:
    """Leave the marker ``fetched/<student>+<assignment>``; a missing directory is skipped."""
    student = student_id if student_id not in ("", "*") else getpass.getuser()
    directory = exchange_root / course_id / "fetched"
    if directory.is_dir():
        (directory / f"{student}+{assignment}").touch(exist_ok=True)


def plan_student_identity(
    requested: str | None,
    hub_user: str | None,
    os_user: str,
    is_root: bool,
    hub_user_has_account: bool = False,
) -> str:
    """Return who fetches or submits: the hub user, else the Unix user (pure).

    Parameters
    ----------
    requested
        The ``--student`` given on the command line, or None.
    hub_user
        ``JUPYTERHUB_USER`` (set by JupyterHub in every user's server), or None.
    os_user
        The name of the process's effective Unix user.
    is_root
        Whether the process runs as root.
    hub_user_has_account
        Whether ``hub_user`` is also a Unix account on this host. Where each
        student has their own account (SystemdSpawner, LocalProcessSpawner)
        the Unix user is the identity the student cannot change, while
        ``JUPYTERHUB_USER`` is a variable they can set in their own
        terminal: a non-root process whose hub user is *another* Unix
        account is refused. Where servers share one account (containers,
        the demo) hub users have no account and the hub user is trusted.

    Raises
    ------
    UsageError
        When ``requested`` is someone else and the caller may not act for
        others: anyone inside a hub user's server (even root, as in the
        single-user demo), and any non-root Unix user. Only root outside a
        hub server (an administrator) may. Also when a non-root process
        claims a hub user that is another Unix account (a forged
        ``JUPYTERHUB_USER``).
    """
    if hub_user and hub_user != os_user and hub_user_has_account and not is_root:
        raise UsageError(
            f"JUPYTERHUB_USER={hub_user} but you are Unix user {os_user}: a student submits "
            "and fetches only as themselves (unset JUPYTERHUB_USER)"
        )
    identity, source = (hub_user, "hub user") if hub_user else (os_user, "Unix user")
    if requested is None or requested == identity:
        return identity
    if is_root and not hub_user:
        return requested
    raise UsageError(
        f"--student {requested}: you are {source} {identity}; a student submits and fetches "
        "only as themselves (leave --student out); only an administrator (root, outside a hub "
        "server) may name another student"
    )


def current_student(requested: str | None, environ: Mapping[str, str] | None = None) -> str:
    """Return the student this process acts for (:func:`plan_student_identity` on this process)."""
    env = os.environ if environ is None else environ
    euid = os.geteuid()
    try:
        os_user = pwd.getpwuid(euid).pw_name
    except KeyError:
        os_user = str(euid)
    hub_user = env.get("JUPYTERHUB_USER") or None
    try:
        has_account = hub_user is not None and bool(pwd.getpwnam(hub_user))
    except KeyError:
        has_account = False
    return plan_student_identity(requested, hub_user, os_user, euid == 0, has_account)


def _exchange_config(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> Any:
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.course_id = course_id
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student_id
    config.Exchange.root = str(exchange_root)
    config.Exchange.path_includes_course = True
    config.Exchange.assignment_dir = str(work_dir)
    config.Exchange.cache = str(work_dir / ".nbgrader_cache")
    return config


def _run(
    kind: str, exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> Any:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory

    check_name(student_id, "student id")
    check_name(assignment, "assignment name")
    config = _exchange_config(exchange_root, course_id, assignment, student_id, work_dir)
    if kind == "fetch":
        config.ExchangeFactory.fetch_assignment = RecordingFetchAssignment
    else:
        config.ExchangeFactory.submit = PrivateSubmit
    factory = ExchangeFactory(config=config)
    make = {
        "fetch": factory.FetchAssignment,
        "submit": factory.Submit,
        "fetch feedback": factory.FetchFeedback,
    }[kind]
    app = make(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    cwd = os.getcwd()
    try:
        os.chdir(work_dir)  # nbgrader logs paths relative to the working directory
        app.start()
        return app
    except ExchangeError as exc:
        raise CoursehubError(
            f"{kind} of assignment {assignment} of course {course_id} by {student_id} failed: {exc}"
        ) from exc
    finally:
        os.chdir(cwd)


def resolve_work_dir(work_dir: str | Path) -> Path:
    """Return ``work_dir`` with ``~`` expanded, made absolute against the current directory.

    Done once, before nbgrader runs in it (nbgrader resolves a relative
    ``assignment_dir`` again from there, which nested ``dir/dir/...``).
    """
    return Path(work_dir).expanduser().absolute()


def fetch_assignment(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> Path:
    """Fetch a released assignment into ``work_dir/<course_id>/<assignment>``; return that path.

    ``work_dir`` may be relative (to the current directory) or start with
    ``~``; the path returned is absolute.

    Raises
    ------
    CoursehubError
        Naming the assignment, the course and the student: not released,
        already fetched, exchange unreadable.
    """
    work_dir = resolve_work_dir(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    _run("fetch", exchange_root, course_id, assignment, student_id, work_dir)
    return work_dir / course_id / assignment


def submit_assignment(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> str:
    """Submit ``work_dir/<course_id>/<assignment>`` as ``student_id`` to the course's inbound.

    Returns the deadline's warning for the student (late; an on-time
    submission kept or replaced), empty when on time.

    Raises
    ------
    CoursehubError
        Naming the assignment, the course and the student: nothing to
        submit, not released, inbound missing or not writable, past a hard
        deadline, a late submission that would replace an on-time one and
        is not confirmed yet (:class:`PrivateSubmit`).
    """
    work_dir = resolve_work_dir(work_dir)
    app = _run("submit", exchange_root, course_id, assignment, student_id, work_dir)
    return str(getattr(app, "deadline_note", ""))


def fetch_feedback(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> list[Path]:
    """Fetch the released feedback of ``student_id``'s submissions of ``assignment``.

    nbgrader's own fetch-feedback (what the Lab's assignment list runs): it
    finds each of the student's submissions in their nbgrader cache
    (``work_dir/.nbgrader_cache`` here) and the feedback file named after
    the submission's secret, so a student only ever finds their own. The
    files land in ``work_dir/<course_id>/<assignment>/feedback/<timestamp>/``;
    the HTML files there are returned, sorted.

    Raises
    ------
    CoursehubError
        Naming the assignment, the course and the student: no feedback
        folder in the exchange, or it cannot be read.
    """
    work_dir = resolve_work_dir(work_dir)
    _run("fetch feedback", exchange_root, course_id, assignment, student_id, work_dir)
    return sorted((work_dir / course_id / assignment / "feedback").glob("*/*.html"))
