"""coursehub's environment settings, its two base folders and the course-id rule.

The bottom module: it imports only :mod:`coursehub.errors` and the standard
library, so that any part of coursehub can ask it.

- :data:`SETTINGS` lists every ``COURSEHUB_*`` environment variable coursehub
  reads, or sets for a process it starts (a job, a git command, a hub
  service), with its default and what it does; :func:`render_settings_table`
  renders it as the Markdown table of ``docs/settings.md``.
- :func:`data_dir` and :func:`runs_dir` resolve the data directory and the
  runner's runs directory.
- :data:`COURSE_ID_RE` and :func:`check_course_id` are the one rule for a
  course id: every id the catalog makes obeys it, and an id that obeys it is
  one safe path component (no ``/``, never ``.`` or ``..``, no leading ``-``).

The course web app also reads ``COURSEHUB_<KEY>`` for each key of its Flask
configuration (``app.config.from_prefixed_env("COURSEHUB")``: a value that
parses as JSON is taken as JSON, e.g. ``true`` or ``300``); those keys are
listed too. The app's other ``HUB_*`` keys come from the hub's
``JUPYTERHUB_*`` variables (:data:`coursehub.web.config.HUB_VARIABLES`),
which win over a ``COURSEHUB_HUB_*`` of the same name, and are not listed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import UsageError

__all__ = [
    "COURSE_ID_MAX_LENGTH",
    "COURSE_ID_RE",
    "COURSE_ID_RULE",
    "SETTINGS",
    "Setting",
    "check_course_id",
    "data_dir",
    "render_settings_table",
    "runs_dir",
    "setting",
]


@dataclass(frozen=True)
class Setting:
    """One ``COURSEHUB_*`` environment variable.

    Attributes
    ----------
    name : str
        The variable's name, e.g. ``"COURSEHUB_DATA_DIR"``.
    default : str
        What applies when it is unset, as a reader sees it (Markdown), e.g.
        ``"`~/.local/share/coursehub`"`` or ``"unset"``.
    meaning : str
        One sentence: what it does, who reads it and, for a variable that
        coursehub sets for a child process, who sets it for whom.
    """

    name: str
    default: str
    meaning: str


#: Every ``COURSEHUB_*`` variable, grouped by subject: paths, catalog, course app, hub,
#: runner, runner jobs, sandbox, grading, material, books, LTI, usage, demo.
SETTINGS: tuple[Setting, ...] = (
    # --- paths ---------------------------------------------------------------------
    Setting(
        "COURSEHUB_DATA_DIR",
        "`$XDG_DATA_HOME/coursehub`, else `~/.local/share/coursehub`",
        "coursehub's data directory (`~` expanded): the SQLite catalog, the material "
        "mirrors, the books and the LTI key live below it unless their own variable is "
        "set; read by the catalog (`coursehub.catalog.db.data_dir`) and everything that "
        "derives from it, set by the rendered hub configuration for the course app, and "
        "also the folder of `coursehub demo` (default there `~/.local/share/coursehub/demo`).",
    ),
    Setting(
        "COURSEHUB_RUNS_DIR",
        "`~/.cache/coursehub/runs`",
        "Where the runner writes each job's log and `<job id>.pid` (not `~`-expanded); "
        "read by the runner and by the busy-activity server extension, hidden from "
        "course environment builds.",
    ),
    Setting(
        "COURSEHUB_SHARED_ROOT",
        "`/srv/coursehub`",
        "Absolute root of the courses' shared data folders, environments and kernels "
        "(`coursehub.courselayout`); read by `coursehub course-data`, `coursehub course-env`, "
        "the hub's course spaces, the course app (`SHARED_ROOT`; as root it repairs the "
        "course groups after each hub sync) and book builds, and set by the rendered hub "
        "configuration for the course app and by the course app for its background book "
        "builds.",
    ),
    # --- catalog -------------------------------------------------------------------
    Setting(
        "COURSEHUB_DATABASE_URL",
        "`sqlite:///` + the data directory's `catalog.sqlite`",
        "SQLAlchemy URL of the catalog (`coursehub.catalog.db.database_url`, also the "
        "course app's `DATABASE_URL`); read by every catalog command and the course app, "
        "set by `coursehub demo` and the rendered hub configuration for the course app, "
        "and passed to the app's autograde process.",
    ),
    # --- course app (Flask configuration keys) -------------------------------------
    Setting(
        "COURSEHUB_SECRET_KEY",
        "unset: a random key per process",
        "The course app's Flask secret key, which signs its sessions, roster previews "
        "and book file links; without it they end when the process restarts.",
    ),
    Setting(
        "COURSEHUB_DEV_USER",
        "unset",
        "The user of a standalone course app in development mode (as "
        "`coursehub web serve --dev-user NAME`); refused when the app runs as a hub service.",
    ),
    Setting(
        "COURSEHUB_DEV_ADMIN",
        "`false`",
        "`true`: the course app's development user is an admin.",
    ),
    Setting(
        "COURSEHUB_DEV_GROUPS",
        "`[]`",
        "The hub groups of the course app's development user (comma-separated or a JSON list).",
    ),
    Setting(
        "COURSEHUB_COURSE_CREATOR_GROUPS",
        "`[]`",
        "Hub groups (comma-separated or a JSON list) whose members may create courses in "
        "any portal of the course app, becoming their lead.",
    ),
    Setting(
        "COURSEHUB_IDENTITY_MAX_AGE_S",
        "`300`",
        "Seconds the course app trusts a hub identity cached in the session before it "
        "asks the hub again.",
    ),
    Setting(
        "COURSEHUB_CHECK_SCHEMA",
        "`true`",
        "`true`: the course app refuses to start on an empty or outdated catalog "
        "(run `coursehub db upgrade`).",
    ),
    Setting(
        "COURSEHUB_TEST_USER_HEADER",
        "`X-Coursehub-Test-User`",
        "Tests only: the request header naming the user of a course app created for "
        "testing (ignored otherwise).",
    ),
    Setting(
        "COURSEHUB_API_TOKEN_RESOLVER",
        "unset: the hub resolves API tokens",
        "Tests only: a function the course app's API asks who owns a token; never set it "
        "in the environment (a string is not a function).",
    ),
    Setting(
        "COURSEHUB_SESSION_COOKIE_NAME",
        "`coursehub-session`",
        "Flask's name of the course app's session cookie.",
    ),
    Setting(
        "COURSEHUB_SESSION_COOKIE_SAMESITE",
        "`Lax`",
        "Flask's `SameSite` attribute of the course app's session cookie.",
    ),
    Setting(
        "COURSEHUB_SESSION_COOKIE_HTTPONLY",
        "`true`",
        "Flask's `HttpOnly` attribute of the course app's session cookie.",
    ),
    Setting(
        "COURSEHUB_MAX_CONTENT_LENGTH",
        "`4194304` (4 MiB)",
        "Flask's largest request body, in bytes, that the course app accepts "
        "(roster uploads, notebooks).",
    ),
    Setting(
        "COURSEHUB_MAX_FORM_MEMORY_SIZE",
        "`4194304` (4 MiB)",
        "Flask's largest form field, in bytes, that the course app accepts.",
    ),
    Setting(
        "COURSEHUB_WTF_CSRF_TIME_LIMIT",
        "unset: as long as the session",
        "Flask-WTF's lifetime of the course app's CSRF tokens, in seconds.",
    ),
    # --- hub -----------------------------------------------------------------------
    Setting(
        "COURSEHUB_HUB_API_URL",
        "`$JUPYTERHUB_API_URL`",
        "The hub's API URL for `coursehub hub` (where it wins over `JUPYTERHUB_API_URL`) "
        "and for the course app (`HUB_API_URL`, where the hub's `JUPYTERHUB_API_URL` wins).",
    ),
    Setting(
        "COURSEHUB_HUB_API_TOKEN",
        "`$JUPYTERHUB_API_TOKEN`",
        "The hub API token of `coursehub hub` (unless `--token-env` names another "
        "variable; it wins over `JUPYTERHUB_API_TOKEN`) and of the course app "
        "(`HUB_API_TOKEN`, where the hub's `JUPYTERHUB_API_TOKEN` wins).",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC",
        "`true`",
        "`0`, `false` or `off` turns off the course app's hub sync after each roster, "
        "member or course change.",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC_URL",
        "the course app's hub API URL",
        "The hub API URL the course app's hub sync uses.",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC_TOKEN",
        "the course app's hub API token",
        "The hub API token the course app's hub sync uses (scopes `admin:users`, "
        "`admin:groups`, `list:users`, `read:users`).",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC_ATTEMPTS",
        "`2`",
        "Attempts of each request of the course app's hub sync (at least 1).",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC_TIMEOUT_S",
        "`5`",
        "Timeout, in seconds, of each request of the course app's hub sync (above 0).",
    ),
    Setting(
        "COURSEHUB_HUB_SYNC_WAIT_S",
        "`5`",
        "Seconds a course app request waits for its background hub sync before "
        "answering (at least 0).",
    ),
    # --- runner --------------------------------------------------------------------
    Setting(
        "COURSEHUB_RUNNER_BACKEND",
        "`local`",
        "The default backend of `coursehub run` and `%coursehub_run`: `local` or `slurm`.",
    ),
    Setting(
        "COURSEHUB_SLOTS_DIR",
        "`/tmp/coursehub-slots`",
        "The host-wide admission slots folder (mode 1777) of the local runner; "
        "hidden from sandboxed autograde kernels, book builds and environment builds.",
    ),
    Setting(
        "COURSEHUB_CPU_BUDGET",
        "the machine's effective CPUs (at least 1)",
        "How many CPUs the local runner's jobs may use at once on this host.",
    ),
    Setting(
        "COURSEHUB_GPU_JOBS",
        "`4`",
        "How many local runner jobs may share one GPU at once.",
    ),
    Setting(
        "COURSEHUB_SLURM_PARTITION",
        "unset: the cluster's default",
        "The Slurm partition of the runner's Slurm backend; set in each server by the "
        "course's resource profile (`coursehub.contract.slurm_env`).",
    ),
    Setting(
        "COURSEHUB_SLURM_ACCOUNT",
        "unset: the cluster's default",
        "The Slurm account of the runner's Slurm backend; set in each server by the "
        "course's resource profile.",
    ),
    Setting(
        "COURSEHUB_SLURM_QOS",
        "unset: the cluster's default",
        "The Slurm QOS of the runner's Slurm backend; set in each server by the course's "
        "resource profile.",
    ),
    # --- runner jobs (set by the runner for the job's bootstrap) -------------------
    Setting(
        "COURSEHUB_N_THREADS",
        "`1`",
        "Set by the runner for each job: its thread count, which the job's bootstrap "
        "gives to PyTorch; passed into sandboxes.",
    ),
    Setting(
        "COURSEHUB_GPU_MEM_FRACTION",
        "unset: no cap",
        "Set by the runner for a job sharing a GPU: the fraction of each visible GPU's "
        "memory the bootstrap lets PyTorch allocate.",
    ),
    Setting(
        "COURSEHUB_CGROUP_PROCS",
        "unset",
        "Set by the local runner for a job: the `cgroup.procs` files (`os.pathsep`-separated) "
        "that the bootstrap joins and its watchdog empties at the end.",
    ),
    Setting(
        "COURSEHUB_PARENT_FD",
        "unset: no watchdog",
        "Set by the local runner for a job: the read end of its lifeline pipe, from which "
        "the bootstrap's watchdog learns that the runner is gone.",
    ),
    Setting(
        "COURSEHUB_ORPHAN",
        "`kill`",
        "Set by the local runner for a job: what its watchdog does when the runner dies "
        "(`keep` for a detached job).",
    ),
    Setting(
        "COURSEHUB_TIMEOUT_S",
        "unset: no limit",
        "Set by the local runner for a job: its time limit in seconds, kept by its watchdog.",
    ),
    Setting(
        "COURSEHUB_GRACE_S",
        "`5`",
        "Set by the local runner for a job: seconds its watchdog waits after SIGTERM "
        "before SIGKILL.",
    ),
    Setting(
        "COURSEHUB_SLOT_FDS",
        "unset",
        "Set by the local runner for a job: the comma-separated descriptors of its slot "
        "locks, held by its watchdog.",
    ),
    # --- sandbox -------------------------------------------------------------------
    Setting(
        "COURSEHUB_GRADER_USER",
        "`coursehub-grader`",
        "The Unix account that runs sandboxed jobs (autograde kernels, book builds); "
        "read by the sandbox and `coursehub grading grader-user`.",
    ),
    Setting(
        "COURSEHUB_SANDBOX_REQUIRED",
        "unset",
        "Set to `1` by the hub's formgrader service for a formgrader run as its own "
        "account: its sandboxed jobs must then get their own namespaces.",
    ),
    # --- grading -------------------------------------------------------------------
    Setting(
        "COURSEHUB_GRADING_COURSES",
        "`/srv/nbgrader/courses`",
        "Parent of the nbgrader course directories (`coursehub.grading.layout`); set by "
        "the rendered demo hub configuration for the course app.",
    ),
    Setting(
        "COURSEHUB_GRADING_EXCHANGE",
        "`/usr/local/share/nbgrader/exchange`",
        "The nbgrader exchange folder shared by every course; set by the rendered demo "
        "hub configuration for the course app.",
    ),
    Setting(
        "COURSEHUB_GRADING_EXECUTE_TIMEOUT",
        "`30`",
        "Seconds nbgrader lets one cell run when it autogrades (a whole number, at least 1).",
    ),
    Setting(
        "COURSEHUB_GRADING_SINGLE_USER",
        "unset: off",
        "`1`, `true` or `yes`: every account is one Unix user (the demo), so nbgrader "
        "does not check submission owners; set by the rendered demo hub configuration.",
    ),
    Setting(
        "COURSEHUB_GRADING_GROUP",
        "unset: `formgrade-<course_id>` if that Unix group exists",
        "The teaching team's Unix group of a course's grading files (`{course_id}` is "
        "replaced; `none`, `-` or empty: owner only).",
    ),
    Setting(
        "COURSEHUB_GRADING_TIMEZONE",
        "`UTC`",
        "The IANA time zone of an assignment's due date when the course app's form names none.",
    ),
    Setting(
        "COURSEHUB_FORMGRADER_COURSES",
        "unset: none",
        "Comma-separated course ids (`*`: all) whose formgrader the hub runs, so that the "
        "course app links to it; set by the rendered demo hub configuration.",
    ),
    Setting(
        "COURSEHUB_FORMGRADER_FULL_SERVER",
        "unset: off",
        "`1`, `true` or `yes`: each formgrader service keeps the whole Jupyter server "
        "(kernels, terminals, Lab) instead of the formgrader only.",
    ),
    Setting(
        "COURSEHUB_AUTOGRADE_LOCK_FD",
        "unset",
        "Set by the course app for the autograde process it starts: the descriptor of the "
        "assignment's autograde lock, already taken.",
    ),
    # --- material ------------------------------------------------------------------
    Setting(
        "COURSEHUB_MATERIAL_DIR",
        "the data directory's `material`",
        "The folder of the courses' material mirrors (`~` expanded; students must be able "
        "to traverse it); read by `coursehub material`, the course app (`MATERIAL_DIR`) "
        "and book builds, set by the course app for its background book builds.",
    ),
    Setting(
        "COURSEHUB_MATERIAL_HOSTS",
        "unset: any host with public addresses only",
        "The repository hosts (names, `*.domain`) and non-public addresses or networks "
        "a course's material may be fetched from, separated by commas or spaces.",
    ),
    Setting(
        "COURSEHUB_GIT_CREDENTIAL",
        "unset",
        "Set by coursehub for a git command that fetches material with a token: the "
        "path of the course's token file, read by coursehub's `GIT_ASKPASS` program.",
    ),
    Setting(
        "COURSEHUB_GIT_CREDENTIAL_HOST",
        "unset",
        "Set by coursehub next to `COURSEHUB_GIT_CREDENTIAL`: the only origin "
        "(scheme, host, port) to which the `GIT_ASKPASS` program gives the token.",
    ),
    # --- books ---------------------------------------------------------------------
    Setting(
        "COURSEHUB_BOOKS_DIR",
        "the data directory's `books`",
        "The folder of the courses' books (`~` expanded); read by `coursehub book`, the "
        "course app (`BOOKS_DIR`), set by the course app for its background book builds "
        "and hidden from environment builds.",
    ),
    # --- LTI -----------------------------------------------------------------------
    Setting(
        "COURSEHUB_LTI_TOOL_KEY",
        "the data directory's `lti/tool-key.pem`",
        "The LTI tool's private key file (`~` expanded, mode 0600); read by `coursehub lti` "
        "and the course app (`LTI_TOOL_KEY`) when it sends grades.",
    ),
    Setting(
        "COURSEHUB_LTI_LAUNCH_TOKEN",
        "unset: LTI launches answer 404",
        "The token with which the hub's LTI authenticator calls the course app's launch "
        "endpoint; set by the rendered hub configuration (a new one at each hub start) "
        "for the course app.",
    ),
    # --- usage ---------------------------------------------------------------------
    Setting(
        "COURSEHUB_USAGE_DIR",
        "unset: usage not recorded (the hub: `<runtime_dir>/usage`)",
        "The usage records folder: of the hub's cgroup spawners, of `coursehub usage` "
        "ingest and prune, and of runner jobs, for which the spawners set it in each server.",
    ),
    Setting(
        "COURSEHUB_USAGE_INTERVAL_S",
        "`60`",
        "Seconds between two usage samples of a runner job (above 0).",
    ),
    Setting(
        "COURSEHUB_COURSE_ID",
        "unset",
        "Set by the cgroup spawners' usage hook in each server: the server's course, "
        "which its runner jobs' usage records name.",
    ),
    Setting(
        "COURSEHUB_GPU_IDLE_S",
        "unset: no GPU culling",
        "Set by the hub's course profiles in a server holding a GPU: after that many idle "
        "seconds the busy-activity extension shuts its kernels down and the server stops.",
    ),
    # --- demo ----------------------------------------------------------------------
    Setting(
        "COURSEHUB_DEMO_PASSWORD",
        "unset",
        "Set by `coursehub demo` for its hub: the shared password of every demo account, "
        "read by the rendered demo hub configuration.",
    ),
    Setting(
        "COURSEHUB_DEMO_SERVICE_TOKEN",
        "unset",
        "Set by `coursehub demo` for its hub: the course app service's API token, read by "
        "the rendered demo hub configuration.",
    ),
    Setting(
        "COURSEHUB_SPAWN_LIMIT",
        "unset: from this machine's CPUs",
        "The demo hub's `concurrent_spawn_limit` (a positive integer), read by `coursehub demo`.",
    ),
    Setting(
        "COURSEHUB_CHP",
        "unset: `<venv>/node`'s, else `configurable-http-proxy` on `PATH`",
        "The configurable-http-proxy program `coursehub demo` starts.",
    ),
)

_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """Return the row of :data:`SETTINGS` named ``name``.

    Parameters
    ----------
    name : str
        A variable name, e.g. ``"COURSEHUB_DATA_DIR"``.

    Returns
    -------
    Setting
        Its row.

    Raises
    ------
    KeyError
        If no row has that name; the message says so and how many rows there are.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not a coursehub setting (coursehub.settings.SETTINGS lists "
            f"{len(SETTINGS)} COURSEHUB_* variables)"
        ) from None


def _cell(text: str) -> str:
    """Return ``text`` safe in one Markdown table cell (``|`` escaped, one line)."""
    return " ".join(text.split()).replace("|", "\\|")


def render_settings_table() -> str:
    """Return :data:`SETTINGS` as a Markdown table, one row per variable, in table order.

    Returns
    -------
    str
        The header ``| Variable | Default | Meaning |``, its separator line, then one
        line per setting (the name in backquotes); lines end with ``\\n``.
    """
    lines = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    lines += [f"| `{s.name}` | {_cell(s.default)} | {_cell(s.meaning)} |" for s in SETTINGS]
    return "\n".join(lines) + "\n"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return coursehub's data directory (not created).

    ``COURSEHUB_DATA_DIR`` if set and non-empty, else ``$XDG_DATA_HOME/coursehub``
    (``XDG_DATA_HOME`` set and non-empty), else ``~/.local/share/coursehub`` (the XDG
    base-directory default); ``~`` is expanded in either variable. The same rule as
    ``coursehub.catalog.db.data_dir``.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``. The home directory of the
        last fallback and of ``~`` is the process's (:meth:`pathlib.Path.home`,
        :meth:`pathlib.Path.expanduser`), not read from ``environ``.

    Returns
    -------
    pathlib.Path
        The folder, absolute unless a variable holds a relative path.
    """
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_DATA_DIR"):
        return Path(env["COURSEHUB_DATA_DIR"]).expanduser()
    xdg = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "coursehub"


def runs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the runner's runs directory, where job logs and pid files go (not created).

    ``COURSEHUB_RUNS_DIR`` if set and non-empty (taken as it is: ``~`` is *not*
    expanded), else ``~/.cache/coursehub/runs`` (``XDG_CACHE_HOME`` is not read).
    The same rule as ``coursehub.runner.core.default_runs_dir`` and
    ``coursehub.spawn.busyactivity.default_runs_dir``.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``. The home directory of the
        fallback is the process's (:meth:`pathlib.Path.home`).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    env = os.environ if environ is None else environ
    configured = env.get("COURSEHUB_RUNS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "coursehub" / "runs"


#: Longest course id, in characters: the catalog's ``Course.course_id`` column (``String(64)``).
COURSE_ID_MAX_LENGTH = 64
#: A course id: 1 to 64 lower-case ASCII letters, digits and ``-``, the first a letter or a
#: digit, nothing else (``\Z``: not even a final newline, which ``$`` would let through).
#: Every id the catalog makes (``coursehub.catalog.courses.make_course_id``: a slug of
#: the UE code, ``-``, the start year, e.g. ``mlmeca-2025``) matches it, and a match is one
#: safe path component, hub group suffix and Unix name part: no ``/``, no ``.``, no
#: leading ``-``, no upper case. Use it with ``match`` or ``fullmatch``.
COURSE_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}\Z")
#: The rule of :data:`COURSE_ID_RE` in words, for messages.
COURSE_ID_RULE = (
    f"1-{COURSE_ID_MAX_LENGTH} lower-case letters a-z, digits 0-9 or '-', "
    "starting with a letter or digit"
)
#: Longest part of a refused value that a message quotes.
_SHOWN = 80


def check_course_id(course_id: str, where: str = "course id") -> str:
    """Return ``course_id`` if it obeys :data:`COURSE_ID_RE`; raise UsageError if not.

    Parameters
    ----------
    course_id : str
        The value to check (not stripped: white space is refused).
    where : str, optional
        What the value is, for the message: ``"--course"``, ``"URL"``... (default
        ``"course id"``).

    Returns
    -------
    str
        ``course_id`` itself.

    Raises
    ------
    coursehub.errors.UsageError
        If it is not a string or not a course id (empty, too long, upper case, ``/``,
        ``.``, ``..``, white space...); the message names ``where``, the value (its
        first 80 characters) and :data:`COURSE_ID_RULE`.
    """
    if isinstance(course_id, str) and COURSE_ID_RE.match(course_id):
        return course_id
    shown = repr(course_id[:_SHOWN]) if isinstance(course_id, str) else repr(course_id)
    if isinstance(course_id, str) and len(course_id) > _SHOWN:
        shown += f"... ({len(course_id)} characters)"
    raise UsageError(f"{where} {shown} is not a course id: {COURSE_ID_RULE}")
