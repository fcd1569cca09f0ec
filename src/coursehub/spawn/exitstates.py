"""Why a server ended, from its process, its systemd unit or its Slurm job, in words (pure).

Each function returns the one line the student's "Server not running" page
shows (:mod:`coursehub.spawn.serverexit`), always starting with "Your server
stopped unexpectedly". The inputs are what the hub can read once the server
is gone:

- a local process: its exit status (:func:`describe_status`);
- a systemd unit: ``systemctl show UNIT -p Result -p ExecMainCode -p
  ExecMainStatus`` (:func:`describe_systemd_exit`); ``Result`` is one of
  systemd's service results, ``systemd.exec(5)``, "$SERVICE_RESULT":
  success, protocol, timeout, exit-code, signal, core-dump, watchdog,
  start-limit-hit, resources, oom-kill;
- a Slurm job: ``scontrol show job -o ID`` (kept ``MinJobAge`` seconds after
  the end, 300 by default) or ``sacct -j ID -X -n -P -o State,ExitCode``
  (:func:`describe_slurm_exit`); job states from Slurm's ``squeue(1)``, "JOB
  STATE CODES"; ``ExitCode`` is ``status:signal``.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping

from coursehub.resources.units import describe_mem

#: The start of every notice.
STOPPED = "Your server stopped unexpectedly"

#: Slurm job states (the first word: sacct writes "CANCELLED by 0") that say why, in words.
SLURM_STATE_REASONS = {
    "CANCELLED": "its Slurm job was cancelled (scancel, by you or an administrator)",
    "NODE_FAIL": "the compute node that ran it failed",
    "BOOT_FAIL": "the compute node that was to run it could not boot",
    "TIMEOUT": "its Slurm job reached its time limit",
    "DEADLINE": "its Slurm job reached its deadline",
    "PREEMPTED": "its Slurm job was preempted by a job of higher priority",
}
#: systemd service results (besides oom-kill, signal, core-dump, exit-code) in words.
SYSTEMD_RESULT_REASONS = {
    "timeout": "systemd stopped it after a timeout",
    "watchdog": "systemd's watchdog stopped it",
    "resources": "systemd could not set up its resources",
    "start-limit-hit": "it was restarted too often",
    "protocol": "it broke systemd's service protocol",
}


def notice(reason: str = "") -> str:
    """Return ``"Your server stopped unexpectedly: <reason>."`` (no reason: the first part)."""
    return f"{STOPPED}: {reason}." if reason else f"{STOPPED}."


def oom_notice(mem_limit: int | None) -> str:
    """Return the notice of a server killed for memory (``mem_limit`` in bytes, or None)."""
    limit = f" of {describe_mem(mem_limit)}" if mem_limit else ""
    return notice(f"out of memory (it reached its memory limit{limit})")


def signal_notice(signum: int) -> str:
    """Return the notice of a server killed by signal ``signum`` (e.g. 9: SIGKILL)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "unknown signal"
    return notice(f"killed by signal {signum} ({name})")


def describe_status(status: int | None) -> str:
    """Return the notice for a ``subprocess.Popen.returncode``-style status.

    Negative: the signal that ended the process; positive: its exit status;
    0 or None: nothing known.
    """
    if status is not None and status < 0:
        return signal_notice(-status)
    if status:
        return notice(f"it exited with status {status}")
    return notice()


def parse_key_values(text: str) -> dict[str, str]:
    """Return the ``Key=Value`` fields of ``scontrol show -o`` or ``systemctl show`` output.

    Fields are separated by white space; the first of a repeated key wins;
    tokens without ``=`` are ignored.
    """
    fields: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key:
            fields.setdefault(key, value)
    return fields


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def parse_slurm_exit_code(exit_code: str) -> tuple[int, int]:
    """Return ``(status, signal)`` from Slurm's ``ExitCode`` ``"status:signal"`` ("" -> 0, 0)."""
    status, _, signum = (exit_code or "").partition(":")
    return _int(status), _int(signum)


def describe_slurm_exit(job_state: str, exit_code: str, mem_limit: int | None) -> str:
    """Return the notice for a server whose Slurm job ended.

    Parameters
    ----------
    job_state
        ``JobState`` of ``scontrol show job`` or ``State`` of ``sacct``
        (``OUT_OF_MEMORY``, ``CANCELLED by 0``, ``NODE_FAIL``, ``FAILED``...);
        "" when unknown.
    exit_code
        ``ExitCode``, ``"status:signal"``; a status above 128 is a shell's
        report of signal ``status - 128``.
    mem_limit
        The server's memory limit in bytes, or None.
    """
    state = (job_state.split() or [""])[0].upper()
    if state == "OUT_OF_MEMORY":
        return oom_notice(mem_limit)
    if state in SLURM_STATE_REASONS:
        return notice(SLURM_STATE_REASONS[state])
    status, signum = parse_slurm_exit_code(exit_code)
    if signum:
        return signal_notice(signum)
    if status > 128:
        return signal_notice(status - 128)
    return describe_status(status)


def describe_systemd_exit(props: Mapping[str, str], mem_limit: int | None) -> str:
    """Return the notice for a server whose systemd unit ended.

    Parameters
    ----------
    props
        ``Result``, ``ExecMainCode`` (1: exited, 2: killed, 3: dumped core,
        ``waitid(2)``'s ``CLD_*``) and ``ExecMainStatus`` (the exit status or
        the signal) of ``systemctl show``; missing keys count as unknown.
    mem_limit
        The server's memory limit in bytes, or None.
    """
    result = props.get("Result", "")
    status = _int(props.get("ExecMainStatus"))
    if result == "oom-kill":
        return oom_notice(mem_limit)
    if result in ("signal", "core-dump") and status:
        return signal_notice(status)
    if result == "exit-code" and status:
        return notice(f"it exited with status {status}")
    if result in SYSTEMD_RESULT_REASONS:
        return notice(SYSTEMD_RESULT_REASONS[result])
    return notice()
