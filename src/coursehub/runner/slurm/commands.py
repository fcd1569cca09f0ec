"""Slurm's command-line tools as functions: sbatch, scontrol, scancel, sstat, sacct.

The runner talks to Slurm through its documented commands (sbatch(1),
scontrol(1), scancel(1), sstat(1), sacct(1); Slurm 22.05) rather than a
library: they need nothing but ``SLURM_CONF`` (or ``/etc/slurm/slurm.conf``)
and munge, exactly what a user's shell has. The ``parse_*``/``explain_*``
functions are pure; the others run one command each and raise
:class:`SlurmError` with one line naming what went wrong.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence

from coursehub.errors import CoursehubError

#: Job states after which a job never runs again (squeue(1), "JOB STATE CODES").
FINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
#: Words of Slurm's messages that mean the controller could not be reached or configured.
UNREACHABLE_HINTS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Zero Bytes were transmitted",
    "could not establish a configuration source",
    "unable to read",
    "Connection refused",
    "Munge",
)
_MEM_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


class SlurmError(CoursehubError):
    """Slurm refused a request or could not be reached (one line, for the user)."""


class SlurmUnreachableError(SlurmError):
    """The Slurm controller cannot be reached (or configured) from this machine."""


def run_slurm(argv: Sequence[str], stdin: str | None = None, timeout_s: float = 30) -> str:
    """Run one Slurm command; return its stdout.

    Raises
    ------
    SlurmUnreachableError
        The command is not installed, timed out, or says the controller is unreachable.
    SlurmError
        Any other failure, with Slurm's last line of error.
    """
    if shutil.which(argv[0]) is None:
        raise SlurmUnreachableError(
            f"Slurm is unreachable: {argv[0]} is not installed (apt-get install slurm-client)"
        )
    try:
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise SlurmUnreachableError(
            f"Slurm is unreachable: {argv[0]} gave no answer in {timeout_s:g} s"
        ) from None
    if done.returncode != 0:
        message = last_error_line(done.stderr) or f"{argv[0]} exited with {done.returncode}"
        if any(hint.lower() in message.lower() for hint in UNREACHABLE_HINTS):
            raise SlurmUnreachableError(f"Slurm is unreachable: {message}")
        raise SlurmError(message)
    return done.stdout


class UnreachableDeadline:
    """The wall-clock time a follower keeps asking an unreachable controller before it gives up.

    The time is counted from the start of the first failed call, the calls'
    own time included: ``scontrol`` waits for the controller before it fails (about
    ``MessageTimeout``, 10 s by default in slurm.conf(5), each), so counting
    only the pauses between calls made a 30 s limit last half an hour.

    Parameters
    ----------
    give_up_s
        Seconds of unreachable controller after which :meth:`expired` is True.
    clock
        A monotonic clock in seconds (``time.monotonic``; tests give a fake one).
    """

    def __init__(self, give_up_s: float, clock: Callable[[], float] | None = None) -> None:
        self.give_up_s = give_up_s
        self._clock = clock or time.monotonic
        self._since: float | None = None

    def failed(self, asked_at: float | None = None) -> None:
        """Note a failed call made at ``asked_at`` (default: now); the first starts the count."""
        if self._since is None:
            self._since = self._clock() if asked_at is None else asked_at

    def answered(self) -> None:
        """Note an answer: the controller is back, the count starts again at the next failure."""
        self._since = None

    def left_s(self) -> float:
        """Seconds left before giving up (``give_up_s`` while the controller answers)."""
        if self._since is None:
            return self.give_up_s
        return self.give_up_s - (self._clock() - self._since)

    def expired(self) -> bool:
        """True once the controller has been unreachable for ``give_up_s`` seconds."""
        return self.left_s() <= 0

    def call_timeout_s(self, longest_s: float, shortest_s: float = 1.0) -> float:
        """Seconds the next call may take: ``longest_s`` cut to the time left, >= ``shortest_s``."""
        return max(shortest_s, min(longest_s, self.left_s()))


def last_error_line(stderr: str) -> str:
    """Return the last non-empty line of a Slurm command's stderr, without ``sbatch: error:``."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    return re.sub(r"^\w+: (error: )?", "", lines[-1])


def parse_scontrol_record(text: str) -> dict[str, str]:
    """Return the ``Key=Value`` fields of one ``scontrol show job -o`` line.

    A value runs up to the next `` Key=``, so values with spaces
    (``Reason=...``, ``Command=...``) are kept whole.
    """
    fields: dict[str, str] = {}
    for match in re.finditer(r"(?:^|\s)([A-Za-z][\w/:]*)=(.*?)(?=\s[A-Za-z][\w/:]*=|$)", text):
        fields.setdefault(match.group(1), match.group(2).strip())
    return fields


def parse_slurm_duration(text: str) -> float | None:
    """Return seconds for Slurm's ``[D-]HH:MM:SS[.fff]``, ``MM:SS.fff`` or ``MM:SS``; None if blank.

    ``parse_slurm_duration("1-02:03:04") == 93784.0``; ``"00:01.500"`` is 1.5 s.
    """
    text = text.strip()
    if not text or text in ("INVALID", "UNLIMITED", "N/A"):
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
    parts = [float(p) for p in text.split(":")]
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + part
    return days * 86400 + seconds


def parse_slurm_mem(text: str) -> int | None:
    """Return bytes for a Slurm memory figure (``54084K``, ``1.50M``, ``0``); None if blank."""
    text = text.strip()
    if not text:
        return None
    unit = _MEM_UNITS.get(text[-1].upper())
    return int(float(text[:-1]) * unit) if unit else int(float(text))


def parse_exit_code(text: str) -> tuple[int, int]:
    """Return ``(exit status, signal)`` from Slurm's ``ExitCode=N:S`` (``"0:0"`` when blank)."""
    code, _, sig = (text or "0:0").partition(":")
    return int(code or 0), int(sig or 0)


def explain_sbatch_error(message: str, request: str, partition: str | None) -> str:
    """Turn sbatch's refusal into one line saying what was wrong with which request.

    Parameters
    ----------
    message
        sbatch's last error line (``Batch job submission failed: ...``).
    request
        The request for people, e.g. ``"2 CPUs, 4.0 GiB, 1 GPU"``.
    partition
        The partition asked for, or None for the default one.

    The phrases matched are those of Slurm's ``slurm_strerror``
    (``src/common/slurm_errno.c``).
    """
    lowered = message.lower()
    where = f"partition {partition!r}" if partition else "the default partition"
    if "invalid partition name" in lowered:
        return f"unknown Slurm partition {partition!r}"
    if "node configuration is not available" in lowered or "memory required" in lowered:
        return f"no node of {where} is large enough for this job ({request})"
    if "invalid generic resource" in lowered:
        return f"{where} has no GPUs that Slurm manages as GRES ({request})"
    if "invalid account" in lowered:
        return f"Slurm account not valid here ({message})"
    if "invalid qos" in lowered:
        return f"Slurm QOS not valid here ({message})"
    if "time limit" in lowered:
        return f"time limit too long for {where} ({message})"
    return f"Slurm refused the job: {message}"


def sbatch(script: str, request: str, partition: str | None) -> str:
    """Submit ``script`` (options in its ``#SBATCH`` lines) on stdin; return the job id.

    Raises
    ------
    SlurmUnreachableError, SlurmError
        Nothing was queued; the message says why.
    """
    try:
        out = run_slurm(["sbatch", "--parsable"], stdin=script)
    except SlurmUnreachableError:
        raise
    except SlurmError as exc:
        raise SlurmError(explain_sbatch_error(str(exc), request, partition)) from None
    job_id = out.strip().split(";")[0]
    if not job_id:
        raise SlurmError(f"sbatch printed no job id: {out!r}")
    return job_id


def job_info(job_id: str, timeout_s: float = 15) -> dict[str, str] | None:
    """Return ``scontrol show job -o`` fields of the job, or None once Slurm has forgotten it.

    ``timeout_s``: seconds the ``scontrol`` call may take (it waits for the
    controller, slurm.conf(5) ``MessageTimeout``, before it says it is down).
    """
    try:
        out = run_slurm(["scontrol", "show", "job", "-o", job_id], timeout_s=timeout_s)
    except SlurmUnreachableError:
        raise
    except SlurmError as exc:
        if "invalid job id" in str(exc).lower():
            return None
        raise
    line = out.strip().splitlines()[0] if out.strip() else ""
    return parse_scontrol_record(line) if line else None


def scancel(job_id: str) -> None:
    """Cancel the job (SIGTERM, SIGKILL after KillWait; a pending job is withdrawn)."""
    run_slurm(["scancel", job_id], timeout_s=15)


def sstat_peak_rss(job_id: str) -> int | None:
    """Return the largest MaxRSS of the running job's steps (``sstat``), or None."""
    try:
        out = run_slurm(["sstat", "-n", "-P", "-a", "-j", job_id, "-o", "MaxRSS"], timeout_s=10)
    except SlurmError:
        return None
    values = [parse_slurm_mem(line) for line in out.splitlines() if line.strip()]
    return max((v for v in values if v is not None), default=None)


def parse_sacct(text: str) -> dict[str, float | int | None] | None:
    """Return elapsed, CPU and peak RSS from ``sacct -n -P -o Elapsed,TotalCPU,MaxRSS`` lines.

    The job's line gives ``Elapsed`` and ``TotalCPU``; ``MaxRSS`` is on the
    steps' lines (``.batch``), so the largest is taken. None when empty.
    """
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows or len(rows[0]) < 3:
        return None
    peaks = [parse_slurm_mem(row[2]) for row in rows if len(row) > 2]
    return {
        "elapsed_s": parse_slurm_duration(rows[0][0]),
        "cpu_s": parse_slurm_duration(rows[0][1]),
        "peak_rss_bytes": max((p for p in peaks if p is not None), default=None),
    }


def sacct_usage(job_id: str) -> dict[str, float | int | None] | None:
    """Return :func:`parse_sacct` of the job, or None where accounting is not kept."""
    try:
        out = run_slurm(
            ["sacct", "-n", "-P", "-j", job_id, "-o", "Elapsed,TotalCPU,MaxRSS"], timeout_s=15
        )
    except SlurmError:
        return None  # e.g. "Slurm accounting storage is disabled"
    return parse_sacct(out)
