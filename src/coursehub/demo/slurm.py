"""``coursehub demo --spawner slurm``: is a Slurm cluster there, and no job left behind.

The demo's servers are Slurm jobs (:class:`coursehub.spawn.slurmspawner.DemoSlurmSpawner`)
on a cluster that already runs on this host, normally the single-node one of
``scripts/slurm-single-node`` (docs/slurm.md). :func:`check_slurm` asks the
controller (``scontrol ping``, Slurm's scontrol(1)) and the nodes (``sinfo``)
before anything starts, and refuses with what to run when they do not answer.

Jobs are not processes of the demo (slurmstepd starts them), so stopping the
hub's process tree does not end them. The hub cancels them itself when it
stops (``cleanup_servers = True`` in the demo); when it could not (killed),
:func:`cancel_leftover_jobs` cancels the jobs whose ids the hub's database
still holds (batchspawner's spawner state, ``{"job_id": ...}``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from coursehub.errors import CoursehubError

#: What to run when no cluster answers (scripts/slurm-single-node in this repository).
START_HINT = (
    "start the single-node cluster as root with `scripts/slurm-single-node start`, then "
    '`eval "$(scripts/slurm-single-node env)"` so that SLURM_CONF points at it (docs/slurm.md)'
)
#: Seconds ``scontrol ping`` and ``sinfo`` may take.
SLURM_QUERY_TIMEOUT_S = 20.0


class SlurmUnavailableError(CoursehubError):
    """No Slurm cluster answers on this host."""


def parse_ping(text: str) -> bool:
    """Return whether ``scontrol ping`` says a controller is up.

    Slurm prints one line per controller, e.g. ``Slurmctld(primary) at node1 is UP``
    (``DOWN`` otherwise; scontrol(1), "ping").
    """
    return any(line.strip().endswith(" is UP") for line in text.splitlines())


def parse_usable_nodes(text: str) -> int:
    """Return how many nodes of ``sinfo -h -r -o '%D %T'`` can take a job.

    ``%D`` counts the nodes of a line and ``%T`` is their state; nodes
    ``idle``, ``mixed``, ``allocated`` or ``completing`` run jobs (a trailing
    ``*``/``~``/``#`` flag marks a non-responding, powered-down or
    powering-up node and is not counted).
    """
    usable = {"idle", "mixed", "allocated", "completing"}
    total = 0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1] in usable:
            total += int(fields[0])
    return total


def check_slurm(env: Mapping[str, str] | None = None) -> str:
    """Check that a Slurm controller and a usable node answer; return the controller's line.

    Raises
    ------
    SlurmUnavailableError
        If Slurm's commands are missing, the controller does not answer, or
        no node can take a job; the message says what to run.
    """
    env = dict(os.environ if env is None else env)
    missing = [
        c for c in ("sbatch", "scontrol", "squeue", "scancel", "sinfo") if not shutil.which(c)
    ]
    if missing:
        raise SlurmUnavailableError(
            f"--spawner slurm: Slurm's commands are not installed ({', '.join(missing)} "
            "missing): apt-get install slurmctld slurmd slurm-client munge, then " + START_HINT
        )
    where = f" (SLURM_CONF={env['SLURM_CONF']})" if env.get("SLURM_CONF") else ""
    if env.get("SLURM_CONF") and not os.path.isfile(env["SLURM_CONF"]):
        raise SlurmUnavailableError(
            f"--spawner slurm: SLURM_CONF={env['SLURM_CONF']} is not a file: " + START_HINT
        )
    ping = _query(["scontrol", "ping"], env)
    if ping.returncode != 0 or not parse_ping(ping.stdout):
        said = (ping.stdout + ping.stderr).strip().splitlines()
        raise SlurmUnavailableError(
            f"--spawner slurm: no Slurm controller answers on this host{where}"
            f" ({said[-1] if said else 'scontrol ping failed'}): " + START_HINT
        )
    nodes = _query(["sinfo", "-h", "-r", "-o", "%D %T"], env)
    if parse_usable_nodes(nodes.stdout) == 0:
        raise SlurmUnavailableError(
            f"--spawner slurm: the Slurm controller{where} has no node that can take a job "
            f"(sinfo: {nodes.stdout.strip() or nodes.stderr.strip() or 'none'}); "
            "`scripts/slurm-single-node status` says why"
        )
    return ping.stdout.strip().splitlines()[0]


def _query(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, env=dict(env), timeout=SLURM_QUERY_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 1, "", f"{command[0]} timed out")


def parse_job_ids(states: Iterable[str | None]) -> list[str]:
    """Return the Slurm job ids in spawner states (JSON text of the hub's ``spawners.state``).

    batchspawner keeps ``{"job_id": "123", ...}`` while a server runs and
    clears it when the server stops; anything else is skipped.
    """
    ids = []
    for text in states:
        try:
            state = json.loads(text or "null")
        except ValueError:
            continue
        job_id = str(state.get("job_id", "")) if isinstance(state, dict) else ""
        if job_id.isdigit():
            ids.append(job_id)
    return ids


def leftover_job_ids(hub_db: Path) -> list[str]:
    """Return the job ids the hub's SQLite database (``jupyterhub.sqlite``) still holds."""
    if not hub_db.is_file():
        return []
    try:
        with sqlite3.connect(f"file:{hub_db}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT state FROM spawners").fetchall()
    except sqlite3.Error:
        return []
    return parse_job_ids(row[0] for row in rows)


def cancel_leftover_jobs(hub_db: Path) -> list[str]:
    """``scancel`` the jobs of :func:`leftover_job_ids`; return their ids (ended ones included)."""
    ids = leftover_job_ids(hub_db)
    if ids and shutil.which("scancel"):
        subprocess.run(["scancel", *ids], capture_output=True, timeout=SLURM_QUERY_TIMEOUT_S)
    return ids
