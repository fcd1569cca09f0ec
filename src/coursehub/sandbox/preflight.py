"""Before a batch of sandboxed jobs: check that the plan works here, or say what to change.

A plan that cannot start its interpreter fails every job of the batch in
the same way (for autograding: "Kernel died before replying to
kernel_info" for every student). :func:`check_plan` runs the interpreter
once inside the plan and turns a failure into one
:class:`~coursehub.errors.CoursehubError` naming the cause.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.sandbox.command import SandboxPlan, plan_sandbox_command
from coursehub.sandbox.folders import blocking_folder

#: What the probe imports: the kernel a sandboxed notebook runs in.
PROBE_CODE = "import ipykernel"
#: Seconds the probe may take (an interpreter start with a cold disk cache).
PROBE_TIMEOUT_S = 60.0


def describe_blocking(path: str | Path, plan: SandboxPlan) -> str:
    """Return "the account X cannot enter F (mode 0700, owner U)" for ``path``, or ""."""
    if plan.account is None:
        return ""
    folder = blocking_folder(path, plan.account)
    if folder is None:
        return ""
    info = folder.stat()
    try:
        import pwd

        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    return (
        f"the sandbox account {plan.account.name} cannot enter {folder} "
        f"(mode {info.st_mode & 0o7777:04o}, owner {owner})"
    )


def check_plan(
    plan: SandboxPlan,
    python: str | None = None,
    code: str = PROBE_CODE,
    needed: Iterable[str | Path] | None = None,
) -> None:
    """Run ``python -c code`` inside ``plan``; raise if it cannot start.

    In ``uid`` mode (no mount namespaces, so no exposures) every folder of
    ``needed`` (default: ``python``'s own folders,
    :func:`coursehub.sandbox.plan.interpreter_paths`) must be open to the
    sandbox account: where one is not, Linux may still start the interpreter,
    which then runs without its virtualenv, so the probe alone would not tell.

    Raises
    ------
    CoursehubError
        One line: which path the sandbox account cannot reach and what to
        change, or the probe's last line of error output.
    """
    from coursehub.sandbox.plan import interpreter_paths

    python = python or sys.executable
    if plan.mode == "none":
        return
    if plan.mode == "uid":
        folders = [python, *(interpreter_paths() if needed is None else needed)]
        for folder in folders:
            blocked = describe_blocking(folder, plan)
            if blocked:
                raise CoursehubError(
                    f"{blocked}, so it cannot run {python}: install coursehub where every "
                    "account can read it (e.g. a virtualenv under /opt/coursehub), or allow "
                    "mount namespaces"
                )
    with tempfile.TemporaryDirectory(prefix="coursehub-probe-") as stage:
        probe = replace(plan, stage_dir=stage if plan.exposures else "")
        try:
            done = subprocess.run(
                plan_sandbox_command([python, "-c", code], probe),
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                cwd="/",
            )
        except subprocess.TimeoutExpired:
            raise CoursehubError(
                f"the sandbox could not start {python} within {PROBE_TIMEOUT_S:.0f} s"
            ) from None
    if done.returncode == 0:
        return
    lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else f"exit status {done.returncode}"
    account = plan.account.name if plan.account else "this account"
    raise CoursehubError(
        f"the sandbox ({plan.mode} mode, as {account}) cannot run {python}: {last}; "
        f"check that {account} can read the installation (files of mode 0644, folders 0755)"
    )
