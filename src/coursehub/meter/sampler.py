"""Sample the cgroups of running servers and write their usage records.

The hub process holds one :class:`Sampler` per usage folder
(:func:`hub_sampler`). The cgroup spawners open a unit when a server's cgroup
is made and close it before the cgroup is removed; a thread samples every open
unit each ``interval_s`` seconds, so a crash of the hub loses at most one
interval of each server's usage. A runner job is sampled by its runner
(:class:`JobMeter`: an ``open`` record, a ``sample`` every ``interval_s``
while it runs) and closed at its end (:func:`record_job_end`) with the
figures of its ``RunResult``, in the same unit.

GPU-seconds are the time a unit *holds* GPUs: the number of GPUs given to it
(the spawner's ``visible_gpus``, the job's ``--gpus``) times its wall time,
whether or not a kernel uses them, since a held GPU is lost to others. Peak
GPU memory is what NVML reports for the unit's processes
(:mod:`coursehub.meter.gpuread`), sampled with the other counters.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from coursehub.meter.cgroupread import read_cgroup_usage
from coursehub.meter.gpuread import GpuReader
from coursehub.meter.journal import USAGE_DIR_VAR, append_record
from coursehub.meter.records import UsageRecord
from coursehub.resources.gpus import GpuInfo

log = logging.getLogger(__name__)

#: Default seconds between two samples of a server (one minute: Prometheus' default scrape).
DEFAULT_INTERVAL_S = 60.0
#: Environment variable: seconds between two samples of a runner job (default 60).
INTERVAL_VAR = "COURSEHUB_USAGE_INTERVAL_S"
#: Environment variable giving a runner job's course (set in the server's environment).
COURSE_VAR = "COURSEHUB_COURSE_ID"
#: Environment variable giving a server's hub user (set by JupyterHub): a runner job's user.
HUB_USER_VAR = "JUPYTERHUB_USER"


@dataclass
class _Unit:
    record: UsageRecord
    version: int
    dirs: tuple[Path, ...]
    n_gpus: int


class Sampler:
    """Open units, sample them, close them; every record goes to ``folder``.

    Parameters
    ----------
    folder
        The usage folder.
    source
        This writer's name in file names (the hub id).
    interval_s
        Seconds between two samples when :meth:`start` runs the thread.
    gpus
        Where GPU memory is read (:class:`GpuReader`; NVML is only loaded once
        a unit holding a GPU is sampled).
    """

    def __init__(
        self,
        folder: Path,
        source: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        gpus: GpuReader | None = None,
    ) -> None:
        self.folder, self.source, self.interval_s = Path(folder), source, interval_s
        self.gpus = gpus or GpuReader()
        self._units: dict[str, _Unit] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(
        self,
        unit_id: str,
        kind: str,
        user: str,
        course_id: str,
        version: int,
        dirs: tuple[Path, ...],
        n_gpus: int = 0,
    ) -> None:
        """Start accounting a unit in the cgroup ``dirs``; write its ``open`` record."""
        now = time.time()
        record = UsageRecord("open", unit_id, kind, user, course_id, now, now)
        with self._lock:
            self._units[unit_id] = _Unit(record, version, tuple(dirs), n_gpus)
        self._write(record)

    def open_units(self) -> list[str]:
        """Return the ids of the units being sampled."""
        with self._lock:
            return sorted(self._units)

    def sample_once(self) -> int:
        """Write a ``sample`` record for every open unit; return how many were written."""
        with self._lock:
            units = list(self._units.values())
        inventory = self.gpus.inventory() if any(u.n_gpus for u in units) else []
        for unit in units:
            self._write(self._read(unit, "sample", inventory))
        return len(units)

    def close(self, unit_id: str, exit_reason: str) -> UsageRecord | None:
        """Write the unit's ``close`` record (its last counters); None if it was not open."""
        with self._lock:
            unit = self._units.pop(unit_id, None)
        if unit is None:
            return None
        inventory = self.gpus.inventory() if unit.n_gpus else []
        record = replace(self._read(unit, "close", inventory), exit_reason=exit_reason)
        self._write(record)
        return record

    def start(self) -> None:
        """Sample every ``interval_s`` seconds in a daemon thread (once per sampler)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="coursehub-usage", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the sampling thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception:  # a failed sample must not stop accounting
                log.exception("coursehub: usage sampling failed")

    def _read(self, unit: _Unit, event: str, inventory: list[GpuInfo]) -> UsageRecord:
        usage = read_cgroup_usage(unit.version, unit.dirs)
        gpu_bytes = self.gpus.memory_of(unit.dirs, inventory) if unit.n_gpus else 0
        now = time.time()
        last = unit.record
        peak = max(last.mem_peak_bytes, usage.mem_peak_bytes or 0, usage.mem_bytes or 0)
        cpu_s = max(last.cpu_s, usage.cpu_s or 0.0)
        gpu_s = unit.n_gpus * (now - last.started_at)
        unit.record = replace(
            last,
            event=event,
            at=now,
            cpu_s=cpu_s,
            mem_peak_bytes=peak,
            gpu_s=gpu_s,
            gpu_peak_bytes=max(last.gpu_peak_bytes, gpu_bytes),
        )
        return unit.record

    def _write(self, record: UsageRecord) -> None:
        try:
            append_record(self.folder, self.source, record)
        except OSError as exc:
            log.warning("coursehub: cannot write usage to %s: %s", self.folder, exc)


_SAMPLERS: dict[Path, Sampler] = {}
_SAMPLERS_LOCK = threading.Lock()


def hub_sampler(folder: Path, source: str, interval_s: float = DEFAULT_INTERVAL_S) -> Sampler:
    """Return the hub process's running sampler of ``folder`` (made and started once)."""
    with _SAMPLERS_LOCK:
        sampler = _SAMPLERS.get(Path(folder))
        if sampler is None:
            sampler = _SAMPLERS[Path(folder)] = Sampler(Path(folder), source, interval_s)
            sampler.start()
        return sampler


def usage_folder(default: Path | None = None) -> Path | None:
    """Return ``$COURSEHUB_USAGE_DIR``, else ``default`` (None: usage not recorded)."""
    value = os.environ.get(USAGE_DIR_VAR, "").strip()
    return Path(value) if value else default


def record_job_end(
    job_id: str,
    started_at: float,
    elapsed_s: float,
    cpu_s: float,
    peak_rss_bytes: int,
    gpu_peak_bytes: int | None,
    n_gpus: int,
    exit_reason: str,
    folder: Path | None = None,
) -> UsageRecord | None:
    """Write a runner job's ``close`` record to the usage folder, if one is set.

    The user is :func:`job_user` (``$JUPYTERHUB_USER`` in a server, else the
    Unix user), the course ``$COURSEHUB_COURSE_ID`` (the server's course).
    Returns the record, or None where no usage folder is set or it cannot be
    written (a job's result never fails on accounting).
    """
    folder = folder or usage_folder()
    if folder is None:
        return None
    user = job_user()
    record = UsageRecord(
        event="close",
        unit_id=job_unit_id(job_id),
        kind="job",
        user=user,
        course_id=os.environ.get(COURSE_VAR, ""),
        at=started_at + elapsed_s,
        started_at=started_at,
        cpu_s=cpu_s,
        mem_peak_bytes=peak_rss_bytes,
        gpu_s=n_gpus * elapsed_s,
        gpu_peak_bytes=gpu_peak_bytes or 0,
        exit_reason=exit_reason,
    )
    try:
        append_record(folder, f"runner-{user}", record)
    except (OSError, ValueError) as exc:
        log.warning("coursehub: cannot write usage to %s: %s", folder, exc)
        return None
    return record


def env_interval_s(env: dict[str, str] | None = None) -> float:
    """Return ``$COURSEHUB_USAGE_INTERVAL_S`` if positive, else :data:`DEFAULT_INTERVAL_S`."""
    text = (os.environ if env is None else env).get(INTERVAL_VAR, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if math.isfinite(value) and value > 0 else DEFAULT_INTERVAL_S


def job_unit_id(job_id: str) -> str:
    """Return a runner job's unit id: ``job:<host name>:<job id>``."""
    return f"job:{socket.gethostname()}:{job_id}"


def job_folder(folder: Path) -> Path:
    """Return the folder where the runner jobs of a hub's servers write: ``<folder>-jobs``.

    A sibling of the hub's own usage folder (which is owner-only), made by
    :func:`ensure_job_folder` so that every user may add files there.
    """
    folder = Path(folder)
    return folder.with_name(folder.name + "-jobs")


#: Mode of the jobs' usage folder: anyone may create a file (wx), nobody but
#: its owner lists it (no r), nobody removes another's file (sticky bit, as /tmp).
JOB_FOLDER_MODE = 0o1733


def ensure_job_folder(folder: Path, reach_users: bool = True) -> Path:
    """Create the jobs' usage folder with :data:`JOB_FOLDER_MODE`; return it.

    Each job's file there is its user's own (0o600, :func:`append_record`);
    ``coursehub usage ingest`` takes job records from a file only for the
    file's owner (:mod:`coursehub.catalog.usage.trust`).

    With ``reach_users`` (servers run as the students' own accounts)
    every user's jobs must reach it: its parent (the hub's runtime
    directory, e.g. ``/run/coursehub``, made ``0700`` by a hub run under
    ``umask 077``) gets search permission for group and others (``--x``:
    they cannot list it) when this process owns it; any other ancestor
    without search permission for others is refused, since each job would
    otherwise lose its usage ("Permission denied").

    Raises
    ------
    OSError
        If the folder cannot be made or its mode set.
    PermissionError
        With ``reach_users``, if an ancestor keeps users out (the message names it and its mode).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, JOB_FOLDER_MODE)
    if not reach_users:
        return folder
    parent = folder.parent
    info = parent.stat()
    if not info.st_mode & stat.S_IXOTH and info.st_uid == os.geteuid():
        os.chmod(parent, stat.S_IMODE(info.st_mode) | stat.S_IXGRP | stat.S_IXOTH)
    for ancestor in (parent, *parent.parents):
        mode = ancestor.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise PermissionError(
                errno.EACCES,
                f"the jobs' usage folder {folder} is out of users' reach: {ancestor} "
                f"is mode {stat.S_IMODE(mode):04o} and not this process's (others need x)",
            )
    return folder


class JobMeter:
    """A runner job's usage while it runs: an ``open`` record, then a ``sample`` now and then.

    Parameters
    ----------
    job_id
        The runner's job id.
    n_gpus
        GPUs the job holds (its GPU-seconds are this times its wall time).
    folder
        The usage folder; None: ``$COURSEHUB_USAGE_DIR``, and nothing is
        written where that is unset.
    interval_s
        Seconds between two samples; None: ``$COURSEHUB_USAGE_INTERVAL_S``,
        else :data:`DEFAULT_INTERVAL_S`.
    """

    def __init__(
        self,
        job_id: str,
        n_gpus: int = 0,
        folder: Path | None = None,
        interval_s: float | None = None,
    ) -> None:
        self.folder = folder or usage_folder()
        self.interval_s = interval_s if interval_s is not None else env_interval_s()
        now = time.time()
        self.user = job_user()
        self.record = UsageRecord(
            "open", job_unit_id(job_id), "job", self.user, os.environ.get(COURSE_VAR, ""), now, now
        )
        self.n_gpus = n_gpus
        self._next = time.monotonic() + self.interval_s
        self._write(self.record)

    def due(self) -> bool:
        """Return True once ``interval_s`` passed since the last sample (and restart the count)."""
        if time.monotonic() < self._next:
            return False
        self._next = time.monotonic() + self.interval_s
        return True

    def sample(
        self, cpu_s: float, mem_peak_bytes: int, gpu_peak_bytes: int | None = None
    ) -> UsageRecord:
        """Write a ``sample`` record with these counters now (counters never go back)."""
        now, last = time.time(), self.record
        self.record = replace(
            last,
            event="sample",
            at=now,
            cpu_s=max(last.cpu_s, cpu_s),
            mem_peak_bytes=max(last.mem_peak_bytes, mem_peak_bytes),
            gpu_s=self.n_gpus * (now - last.started_at),
            gpu_peak_bytes=max(last.gpu_peak_bytes, gpu_peak_bytes or 0),
        )
        self._write(self.record)
        return self.record

    def _write(self, record: UsageRecord) -> None:
        if self.folder is None:
            return
        try:
            append_record(self.folder, f"runner-{self.user}", record)
        except (OSError, ValueError) as exc:
            log.warning("coursehub: cannot write usage to %s: %s", self.folder, exc)


def job_user(env: Mapping[str, str] | None = None) -> str:
    """Return the user a runner job is charged to: ``$JUPYTERHUB_USER``, else the Unix user.

    In a server, JupyterHub sets ``JUPYTERHUB_USER`` to its hub user, the
    same name as the Unix account where servers run as the students' own
    accounts, and the only name of the student where every server runs as
    the hub's account (the demo's). Outside a server: the Unix user.
    """
    name = (os.environ if env is None else env).get(HUB_USER_VAR, "").strip()
    return name or _unix_user()


def _unix_user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
