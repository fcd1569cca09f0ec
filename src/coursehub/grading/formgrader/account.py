"""Each course's formgrader as an unprivileged account of its own, reaching its own course only.

A formgrader is a hub-managed service (:mod:`coursehub.grading.formgrader.service`).
JupyterHub runs a managed service as the hub's own Unix account unless told
otherwise (``services/service.py``, ``Service.user``), which on a hub run as
root is root. So when coursehub renders the services as root, each course's
formgrader runs through the one sandbox (:mod:`coursehub.sandbox`) as the
account ``fg-<hub_id>-<course_id>`` (:func:`formgrader_user_name`: a
host-wide name, so it carries the hub's id, :func:`coursehub.contract.hub_id_of_data_dir`;
two hubs on one host with the same course never share it):

- its primary group is the course's grading group: the team's Unix group
  where the site has one (:func:`coursehub.grading.perms.resolve_grading_group`),
  else a group of its own name, created with the account and given to the
  course directory; so it reads and writes that course's directory (mode
  ``3770``, group-owned) and no other course's; the course's
  ``nbgrader_config.py``, which every autograde loads, stays read-only to it
  (:mod:`coursehub.grading.perms`);
- it has no password, no shell and a home inside its course's directory
  (:func:`formgrader_home`: Jupyter's runtime files go there);
- it runs with no capabilities, ``no_new_privs`` and the account's task
  limit; where the installation lies under a folder the account cannot
  enter (a virtualenv under ``/root``, the demo's data folder), it runs in
  a mount namespace of its own with the installation exposed read-only and
  its course directory and the exchange writable, the rest of such a folder
  covered (:func:`coursehub.sandbox.folders.plan_exposures`); the folders of
  :func:`plan_formgrader_hidden` that do not hold its course are hidden, the
  others' files are kept out by their modes; it keeps the host's network (it
  talks to the hub) and the host's PID namespace (the hub stops it with
  signals).

The "autograde" button of such a formgrader starts each student's kernel in
a user namespace inside it (:mod:`coursehub.grading.sandbox.kernel`); where
the host refuses user namespaces it refuses to grade
(:data:`coursehub.sandbox.env.SANDBOX_REQUIRED_VAR`), since a kernel with the
formgrader's uid could rewrite the course's gradebook.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.grading.layout import CourseLayout
from coursehub.grading.perms import FORMGRADER_GROUP_PREFIX, group_id, resolve_grading_group
from coursehub.sandbox.account import SandboxAccount, find_sandbox_account
from coursehub.sandbox.command import SandboxPlan

#: Prefix of a formgrader's Unix account name (then the hub id, ``-`` and the course id).
FORMGRADER_USER_PREFIX = FORMGRADER_GROUP_PREFIX
#: Longest user name Debian's useradd(8) accepts (shadow-utils, ``USER_NAME_MAX_LENGTH``).
MAX_USER_NAME = 32
#: Where the namespace of a formgrader stages its exposed folders (root's, emptied at boot).
STAGE_ROOT = Path("/run/coursehub/formgrader-stage")

_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]*$")


@dataclass(frozen=True)
class FormgraderAccount:
    """How one course's formgrader runs: its account, its home and its sandbox plan."""

    course_id: str
    account: SandboxAccount
    home: Path
    plan: SandboxPlan


def formgrader_user_name(course_id: str, hub_id: str) -> str:
    """Return the Unix account of ``course_id``'s formgrader: ``fg-<hub_id>-<course_id>`` (pure).

    A course id that is not a valid Unix user name (upper case, dots) or
    would make the name longer than :data:`MAX_USER_NAME` gives
    ``fg-<hub_id>-<first 12 hex digits of its SHA-256>`` instead.
    """
    name = f"{FORMGRADER_USER_PREFIX}{hub_id}-{course_id}"
    if len(name) <= MAX_USER_NAME and _USER_NAME.match(name):
        return name
    digest = hashlib.sha256(course_id.encode()).hexdigest()[:12]
    return f"{FORMGRADER_USER_PREFIX}{hub_id}-{digest}"


def formgrader_home(layout: CourseLayout) -> Path:
    """Return the formgrader account's home: ``<course_dir>/coursehub/formgrader-home``."""
    return layout.reports_dir / "formgrader-home"


def plan_groupadd(group: str) -> list[str]:
    """Return the command creating the course's grading group (a system group) (pure)."""
    return ["groupadd", "--system", group]


def plan_formgrader_useradd(name: str, group: str, home: Path) -> list[str]:
    """Return the command creating a formgrader's account (pure).

    A system account whose primary group is the course's grading group, no
    password, no login shell, its home not created by useradd (the course
    directory's modes apply to it).
    """
    return [
        "useradd",
        "--system",
        "--gid",
        group,
        "--no-create-home",
        "--home-dir",
        str(home),
        "--shell",
        "/usr/sbin/nologin",
        name,
    ]


def grading_group_name(
    course_id: str, account_name: str, environ: Mapping[str, str] | None = None
) -> str:
    """Return the course's grading group: the team's Unix group, else ``account_name``.

    The team's group is that of :func:`coursehub.grading.perms.resolve_grading_group`
    (``COURSEHUB_GRADING_GROUP``, else an existing ``formgrade-<course_id>``).

    Raises
    ------
    CoursehubError
        If ``COURSEHUB_GRADING_GROUP`` says ``none`` (owner-only course
        files: a formgrader account could not reach them), or names a group
        that does not exist.
    """
    env = os.environ if environ is None else environ
    setting = env.get("COURSEHUB_GRADING_GROUP")
    group = resolve_grading_group(course_id, env)
    if setting is None:
        return group or account_name
    if group is None:
        raise CoursehubError(
            f"course {course_id}: COURSEHUB_GRADING_GROUP={setting!r} keeps the course files "
            "owner-only, so its formgrader account could not reach them: unset it or name a group"
        )
    return group


def ensure_formgrader_account(
    layout: CourseLayout, hub_id: str, environ: Mapping[str, str] | None = None
) -> SandboxAccount:
    """Return the account of the course's formgrader, creating it and its group (as root).

    Raises
    ------
    CoursehubError
        If the group or the account cannot be created or moved to the
        course's group (the command to run as root is in the message), or if
        the account is root.
    """
    name = formgrader_user_name(layout.course_id, hub_id)
    group = grading_group_name(layout.course_id, name, environ)
    if group_id(group) is None:
        _run(plan_groupadd(group), f"the grading group {group!r}")
    account = find_sandbox_account(name)
    if account is None:
        _run(plan_formgrader_useradd(name, group, formgrader_home(layout)), f"account {name!r}")
        account = find_sandbox_account(name)
    gid = group_id(group)
    if account is not None and account.uid != 0 and account.gid != gid:
        # the site gave the course a team group since: the formgrader follows it
        _run(["usermod", "--gid", group, name], f"the group of account {name!r}")
        account = find_sandbox_account(name)
    if account is None or account.uid == 0 or account.gid != gid:
        raise CoursehubError(
            f"formgrader account {name!r} must exist, not be root and have the primary group "
            f"{group!r} (usermod --gid {group} {name})"
        )
    return account


def _run(command: list[str], what: str) -> None:
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip()
        raise CoursehubError(
            f"cannot create {what} ({detail}); as root run: {' '.join(command)}"
        ) from exc


def plan_formgrader_hidden(layout: CourseLayout, environ: Mapping[str, str]) -> list[str]:
    """Return the folders a formgrader's namespace hides (those holding its course are kept).

    The autograde kernels' list (:func:`coursehub.grading.sandbox.plan.plan_hidden_paths`:
    the courses' parent, the exchange, the runner's slots, the catalog's data
    folder); :func:`coursehub.sandbox.folders.hidden_paths` then skips those
    that hold the course directory or the exchange, where the Unix modes of
    the other courses' directories and of the catalog's files keep them out.
    """
    from coursehub.grading.sandbox.plan import plan_hidden_paths

    return plan_hidden_paths(layout.course_dir, layout.exchange_root, environ)


def prepare_formgrader(
    layout: CourseLayout, hub_id: str, environ: Mapping[str, str] | None = None
) -> FormgraderAccount:
    """Create the course's formgrader account and home and return how it runs (as root).

    The home is created owned by the account; the course directory's modes
    are set again (:func:`coursehub.grading.layout.secure_course`) now that
    its grading group exists.

    Raises
    ------
    CoursehubError
        As :func:`ensure_formgrader_account`, or if the sandbox cannot be
        planned on this host.
    """
    from coursehub.grading.layout import secure_course
    from coursehub.sandbox.plan import make_plan

    env = os.environ if environ is None else environ
    account = ensure_formgrader_account(layout, hub_id, env)
    group = grading_group_name(layout.course_id, account.name, env)
    layout = replace(layout, grading_group=group)
    home = formgrader_home(layout)
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, account.uid, account.gid)
    secure_course(layout)
    plan = make_plan(
        plan_formgrader_hidden(layout, env),
        writable=[layout.course_dir, layout.exchange_root],
        network=True,
        stage_dir=STAGE_ROOT / account.name,
        account_name=account.name,
        pid_namespace=False,
    )
    return FormgraderAccount(layout.course_id, account, home, plan)


def prepare_formgraders(
    layouts: Sequence[CourseLayout], hub_id: str
) -> dict[str, FormgraderAccount]:
    """As root, give each course's formgrader its own account and check it can start; else {}.

    ``hub_id``: the hub's id (:func:`coursehub.contract.hub_id_of_data_dir`),
    part of every account's name.

    :func:`prepare_formgrader` for each course, then
    the sandbox's preflight (:func:`coursehub.sandbox.preflight.check_plan`)
    with the formgrader's imports.

    Raises
    ------
    CoursehubError
        One line: an account that cannot be created, or a plan that cannot
        start the formgrader on this host (what to change).
    """
    from coursehub.sandbox.preflight import check_plan

    if os.geteuid() != 0:
        return {}
    accounts = {layout.course_id: prepare_formgrader(layout, hub_id) for layout in layouts}
    for run in accounts.values():
        check_plan(run.plan, code=FORMGRADER_PROBE)
    return accounts


#: What the formgrader's preflight imports (its server and nbgrader's extension).
FORMGRADER_PROBE = "import jupyterhub.singleuser, nbgrader.server_extensions.formgrader"
