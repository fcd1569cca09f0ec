"""Whether the hub's job watch sees the students' Slurm jobs (``PrivateData=jobs``).

The hub's watch (:mod:`coursehub.spawn.slurmwatch`) asks ``squeue`` about
every server's job at once, as the hub's own user, and notices a dead server
within about 2 s. Where slurm.conf(5) sets ``PrivateData=jobs``, "prevents
users from viewing jobs or job steps belonging to other users" (root,
``SlurmUser`` and Slurm operators and administrators excepted): the watch
then lists none of the students' jobs and each dead server waits for the
hub's periodic poll (``poll_interval``, 8 s as rendered). This check reads
``PrivateData`` and ``SlurmUser`` from ``scontrol show config`` (scontrol(1))
and judges for the user running it, which should be the hub's.
"""

from __future__ import annotations

import os
import pwd
import shutil

from coursehub.doctor.result import CheckResult, ok, skip, warn

NAME = "slurm-watch"


def parse_config(text: str) -> dict[str, str]:
    """Return ``{key: value}`` from ``scontrol show config`` lines ``Key = Value`` (pure)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if " = " in line)
    return {key.strip(): value.strip() for key, value in pairs}


def plan_watch_check(config: dict[str, str], user: str) -> CheckResult:
    """Judge whether ``user``'s ``squeue`` lists other users' jobs under ``config`` (pure).

    ``PrivateData`` is a comma-separated list (slurm.conf(5)); ``none`` or
    a list without ``jobs`` hides nothing. ``root`` and ``SlurmUser`` see
    every job; a Slurm operator (``sacctmgr ... AdminLevel=Operator``, which
    needs slurmdbd) does too, which this check cannot see, hence a warning
    rather than a failure.
    """
    private = {item.strip().lower() for item in config.get("PrivateData", "").split(",")}
    if "jobs" not in private:
        return ok(NAME, "squeue lists every user's jobs: a dead server is noticed within 2 s")
    slurm_user = config.get("SlurmUser", "").split("(")[0].strip()
    if user in ("root", slurm_user):
        return ok(NAME, f"PrivateData=jobs, but {user} sees every job (root or SlurmUser)")
    return warn(
        NAME,
        f"PrivateData=jobs hides the students' jobs from {user}: the hub's job watch sees "
        "none, and a dead server is noticed only at the periodic poll (8 s); make the hub's "
        f"user a Slurm operator (sacctmgr modify user {user} set AdminLevel=Operator) or run "
        "the hub as root",
    )


def check_slurm_watch(timeout_s: float = 5.0) -> CheckResult:
    """Read the controller's ``PrivateData`` and judge it for this process's user.

    Skipped where ``scontrol`` is not installed or the controller does not
    answer (the ``slurm`` check says why).
    """
    from coursehub.runner.slurm.commands import SlurmError, run_slurm

    if shutil.which("scontrol") is None:
        return skip(NAME, "scontrol is not installed: no Slurm on this host")
    try:
        text = run_slurm(["scontrol", "show", "config"], timeout_s=timeout_s)
    except SlurmError as exc:
        return skip(NAME, f"{exc}")
    return plan_watch_check(parse_config(text), pwd.getpwuid(os.geteuid()).pw_name)
