"""One build's venv and pip, run in the sandbox (:mod:`coursehub.sandbox`), then sealed.

The steps of :func:`coursehub.courseenv.plan.plan_build_steps` run as the
sandbox account (as root) or as the user, each in its own session, all
within the build's deadline; their output goes to the build log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.courseenv.errors import EnvBuildError
from coursehub.courseenv.layout import EnvPaths
from coursehub.courseenv.pipconfig import (
    local_pip_folders,
    plan_needs_network,
    plan_pip_env,
    read_pip_config,
)
from coursehub.courseenv.plan import plan_build_hidden, plan_build_steps
from coursehub.courseenv.seal import (
    installed_packages,
    interpreter_links,
    plan_interpreter_change,
    seal_build,
)
from coursehub.errors import CoursehubError
from coursehub.sandbox.command import SandboxPlan, chown_tree, plan_sandbox_command

#: Mode of the build log: root writes, the course app (root) and admins read.
LOG_MODE = 0o640


def run_build(
    paths: EnvPaths,
    root: Path,
    requirements: Path,
    build: Path,
    log_path: Path,
    python: str,
    timeout_s: float,
) -> list[str]:
    """Run venv and pip in the sandbox, seal the build, return its packages (``name==version``).

    ``build`` is made here (it must not exist); its log is ``log_path``
    (mode :data:`LOG_MODE`); every step together may take ``timeout_s``
    seconds. See :mod:`coursehub.courseenv.build`.

    Raises
    ------
    EnvBuildError
        If the sandbox cannot run, a step fails or runs past the deadline, a
        requirement replaced the interpreter, or the build cannot be sealed.
    CoursehubError
        If a pip setting of the site holds a credential.
    """
    from coursehub.sandbox.workdir import make_job_dir

    deadline = time.monotonic() + timeout_s
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, LOG_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as log:
        config = read_pip_config(python)
        job = make_job_dir()
        try:
            home, stage = job / "home", job / "stage"
            for folder in (home / "tmp", stage):
                folder.mkdir(parents=True)
            job_requirements = job / "requirements.txt"
            shutil.copyfile(requirements, job_requirements)
            build.mkdir(mode=0o755)
            plan, env = _plan_build_sandbox(paths, root, python, config, job, build)
            account = plan.account.name if plan.account else "this account"
            log.write(
                f"# sandbox: {plan.mode} mode, as {account}, "
                f"network {'kept' if plan.network else 'off'}\n"
            )
            steps = plan_build_steps(python, build, job_requirements)
            _run_steps(
                paths, steps, build, plan, env, str(home), log, log_path, deadline, timeout_s
            )
        finally:
            shutil.rmtree(job, ignore_errors=True)
        seal_build(build)
        packages = installed_packages(build)
        log.write("# installed (read from the dist-info files):\n")
        log.write("".join(f"{package}\n" for package in packages))
    return packages


def _plan_build_sandbox(
    paths: EnvPaths,
    root: Path,
    python: str,
    config: Mapping[str, str],
    job: Path,
    build: Path,
) -> tuple[SandboxPlan, dict[str, str]]:
    """Return the sandbox plan of the build's steps and their environment.

    As root, the job folder and ``build`` become the sandbox account's.

    Raises
    ------
    EnvBuildError
        If a folder above the shared root is closed to the sandbox account,
        or the sandbox cannot start ``python`` with venv and ensurepip.
    """
    from coursehub.sandbox.plan import interpreter_paths, make_plan
    from coursehub.sandbox.preflight import check_plan, describe_blocking

    python_home = Path(python).resolve().parent.parent
    plan = make_plan(
        plan_build_hidden(root, paths.course_id, build, os.environ),
        keep=[job, build],
        needed=[*interpreter_paths(), str(python_home), *local_pip_folders(config)],
        network=plan_needs_network(config),
        stage_dir=job / "stage",
        private_dir=job,
    )
    env = plan_pip_env(os.environ, config, home=str(job / "home"))
    if plan.account is not None:
        env["USER"] = env["LOGNAME"] = plan.account.name
        blocked = describe_blocking(build, plan)
        if blocked:
            raise EnvBuildError(
                f"course {paths.course_id}: {blocked}, so it cannot build the "
                "environment: every folder above the shared root must be open "
                "(mode 0755)"
            )
        chown_tree(job, plan.account.uid, plan.account.gid)
        os.chown(build, plan.account.uid, plan.account.gid)
    try:
        check_plan(plan, python=python, code="import venv, ensurepip")
    except CoursehubError as exc:
        raise EnvBuildError(f"course {paths.course_id}: {exc}") from None
    return plan, env


def _run_steps(
    paths: EnvPaths,
    steps: list[list[str]],
    build: Path,
    plan: SandboxPlan,
    env: Mapping[str, str],
    cwd: str,
    log: Any,
    log_path: Path,
    deadline: float,
    timeout_s: float,
) -> None:
    """Run ``steps`` one by one (:func:`_run_step`); fail if one replaced ``bin/python*``.

    Raises
    ------
    EnvBuildError
        If a step fails or runs past ``deadline``, or the interpreter links
        venv made (after the first step) changed.
    """
    links: dict[str, str | None] = {}
    for step, argv in enumerate(steps):
        _run_step(paths, argv, plan, env, cwd, log, log_path, deadline, timeout_s)
        if step == 0:  # the interpreter as venv made it
            links = interpreter_links(build)
    changed = plan_interpreter_change(links, interpreter_links(build))
    if changed:
        raise EnvBuildError(
            f"course {paths.course_id}: a requirement replaced the environment's "
            f"interpreter ({', '.join('bin/' + n for n in changed)}); remove that "
            f"package from the requirements (log {log_path})"
        )


def _run_step(
    paths: EnvPaths,
    argv: list[str],
    plan: SandboxPlan,
    env: Mapping[str, str],
    cwd: str,
    log: Any,
    log_path: Path,
    deadline: float,
    timeout_s: float,
) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    # its own session: whatever the step leaves behind is killed with it (uid and none modes)
    proc = subprocess.Popen(
        plan_sandbox_command(argv, plan),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        log.write(f"\nstopped after {timeout_s:g} s\n")
        raise EnvBuildError(
            f"course {paths.course_id}: the build took more than {timeout_s:g} s (log {log_path})"
        ) from None
    _kill_session(proc)
    if returncode != 0:
        log.flush()
        raise EnvBuildError(
            f"course {paths.course_id}: {Path(argv[0]).name} {' '.join(argv[1:4])} "
            f"failed: {_last_line(log_path)} (log {log_path})"
        )


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _last_line(path: Path) -> str:
    lines = [
        line.strip()
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    ]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:300]
