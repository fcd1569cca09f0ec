"""This host: the sandbox, cgroup controllers, Slurm, the data folder's disk, Jupyter's start."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.doctor.result import CheckResult, fail, ok, skip, warn
from coursehub.errors import CoursehubError
from coursehub.resources.cgroupfs import CGROUP_ROOT, PROC_CGROUP


def check_sandbox(python: str | None = None) -> CheckResult:
    """Start the sandbox's interpreter once as its account (the sandbox's own preflight).

    The plan is :func:`coursehub.sandbox.plan.make_plan`'s and the probe
    :func:`coursehub.sandbox.preflight.check_plan`, as before an autograde
    batch. Unlike a sandboxed job, the doctor creates no account: a missing
    one warns with the ``useradd`` to run. Without a sandbox here (not root,
    no user namespaces) it warns: students' code would run unconfined.
    """
    from coursehub.sandbox.account import find_sandbox_account, plan_useradd, sandbox_user_name
    from coursehub.sandbox.command import sandbox_mode
    from coursehub.sandbox.plan import make_plan
    from coursehub.sandbox.preflight import check_plan

    try:
        mode = sandbox_mode()
    except CoursehubError as exc:
        return fail("sandbox", str(exc))
    if mode == "none":
        return warn(
            "sandbox",
            "no sandbox on this host (not root, no user namespaces): autograding runs "
            "students' code unconfined; run the course app as root or allow user namespaces",
        )
    name = sandbox_user_name()
    if mode in ("root", "uid") and find_sandbox_account(name) is None:
        return warn(
            "sandbox",
            f"the sandbox account {name} does not exist yet (the first sandboxed job creates "
            f"it): as root run {' '.join(plan_useradd(name))}",
        )
    python = python or sys.executable
    try:
        check_plan(make_plan(mode=mode, account_name=name), python=python)
    except CoursehubError as exc:
        return fail("sandbox", str(exc))
    return ok("sandbox", f"the sandbox ({mode} mode, as {name}) runs {python}")


def check_cgroups(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> CheckResult:
    """Fail when job cgroups cannot be made (:func:`coursehub.resources.cgroups.job_cgroup_bases`).

    Without writable cpu and memory controllers the cgroup spawners cannot
    start servers and runner jobs' limits are only watched by sampling. Where
    systemd is PID 1 and this is root, runner jobs still get their limits
    from ``systemd-run --scope`` (:func:`coursehub.runner.limits.confine`):
    it warns then.
    """
    from coursehub.resources.cgroups import (
        CgroupUnavailableError,
        job_cgroup_bases,
        systemd_available,
    )

    try:
        version, cpu_base, mem_base = job_cgroup_bases(cgroup_root, proc_cgroup)
    except CgroupUnavailableError as exc:
        if cgroup_root == CGROUP_ROOT and os.geteuid() == 0 and systemd_available():
            return warn(
                "cgroups",
                f"{exc}: runner jobs get their limits from systemd-run, but the cgroup "
                "spawners cannot start servers; use the systemd spawner",
            )
        return fail(
            "cgroups",
            f"{exc}: the cgroup spawners cannot start servers and job limits are only "
            "sampled; run as root on a host whose cgroup file system is mounted read-write",
        )
    where = str(cpu_base) if cpu_base == mem_base else f"{cpu_base} and {mem_base}"
    return ok("cgroups", f"cgroup v{version} cpu and memory controllers writable at {where}")


def check_slurm(environ: Mapping[str, str] | None = None, timeout_s: float = 5.0) -> CheckResult:
    """``scontrol ping`` within ``timeout_s`` where the runner's backend is Slurm.

    Skipped unless ``COURSEHUB_RUNNER_BACKEND=slurm``. The command and its
    one-line errors are :func:`coursehub.runner.slurm.commands.run_slurm`'s;
    ``scontrol ping`` (scontrol(1)) prints ``Slurmctld(primary) at HOST is
    UP`` (or ``DOWN``) per controller.
    """
    from coursehub.runner.api import BACKEND_VAR
    from coursehub.runner.slurm.commands import SlurmError, run_slurm

    env = os.environ if environ is None else environ
    if env.get(BACKEND_VAR, "local").strip() != "slurm":
        return skip("slurm", f"{BACKEND_VAR} is not slurm: this site runs jobs locally")
    try:
        out = run_slurm(["scontrol", "ping"], timeout_s=timeout_s)
    except SlurmError as exc:
        return fail("slurm", f"{exc}: jobs with --backend slurm cannot be submitted")
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    down = [line for line in lines if line.endswith("DOWN")]
    if down or not lines:
        what = "; ".join(down) or "scontrol ping printed nothing"
        return fail("slurm", f"{what}: start slurmctld (systemctl start slurmctld)")
    return ok("slurm", "; ".join(lines))


def disk_level(percent: float, warn_at: float, fail_at: float) -> str:
    """Return ``"ok"``, ``"warn"`` (from ``warn_at`` %) or ``"fail"`` (``fail_at`` %) (pure)."""
    if percent >= fail_at:
        return "fail"
    return "warn" if percent >= warn_at else "ok"


def check_data_disk(folder: Path, warn_at: float = 90.0, fail_at: float = 98.0) -> CheckResult:
    """Compare the use of the disk holding the data folder with the thresholds.

    ``folder`` is :func:`coursehub.settings.data_dir` (the SQLite catalog, the
    mirrors, the books, the usage records); one not made yet is measured at
    its nearest existing parent. Figures from :func:`psutil.disk_usage`
    (statvfs(3): ``percent`` is used / (used + available to non-root)).
    """
    import psutil

    from coursehub.resources.units import describe_mem

    where = folder
    while not where.exists() and where != where.parent:
        where = where.parent
    usage = psutil.disk_usage(str(where))
    line = (
        f"the disk of {folder} is {usage.percent:.0f} % full "
        f"({describe_mem(usage.free)} free of {describe_mem(usage.total)})"
    )
    level = disk_level(usage.percent, warn_at, fail_at)
    if level == "ok":
        return ok("data disk", line)
    limit = fail_at if level == "fail" else warn_at
    advice = f"above {limit:g} %: free space there or move COURSEHUB_DATA_DIR to a larger disk"
    return CheckResult("data disk", level, f"{line}, {advice}")


#: The packages jsonschema's ``_format`` imports for the ``iri`` formats, in its order of
#: preference (jsonschema 4.26): ``rfc3987`` (regular expressions) first, else
#: ``rfc3987_syntax``, which builds Lark Earley parsers when imported.
IRI_CHECKERS = ("rfc3987", "rfc3987_syntax")


def check_jupyter_start(find: Any = importlib.util.find_spec) -> CheckResult:
    """Warn when importing jsonschema builds rfc3987-syntax's IRI parsers (CPU at every start).

    jsonschema 4.25+ imports ``rfc3987_syntax`` when it is installed and
    ``rfc3987`` is not (``jsonschema/_format.py``); that module builds its
    grammar's Earley parsers at import (python-jsonschema/jsonschema#1428,
    opendatahub-io/notebooks#3532): about 0.7 s of CPU here, paid by every
    process that imports jsonschema (each single-user server through
    jupyter_events, the hub, nbformat's validation in nbgrader), which at
    an exam's start is a third of a server's start. jupyter_events asks for
    ``jsonschema[format-nongpl]``, which installs it; no Jupyter schema uses
    the ``iri`` formats, and jsonschema leaves a format whose checker is not
    installed unchecked. ``find``: :func:`importlib.util.find_spec` (a stand-in
    in tests).
    """
    if find("jsonschema") is None:
        return skip("jupyter start", "jsonschema is not installed here")
    preferred, slow = IRI_CHECKERS
    if find(preferred) is None and find(slow) is not None:
        return warn(
            "jupyter start",
            "rfc3987-syntax is installed: importing jsonschema builds its IRI parsers, about "
            "0.7 s of CPU at every Jupyter server, hub and nbgrader start "
            "(python-jsonschema/jsonschema#1428); remove it: "
            f"{sys.executable} -m pip uninstall -y rfc3987-syntax",
        )
    return ok("jupyter start", "jsonschema imports without building rfc3987-syntax's parsers")
