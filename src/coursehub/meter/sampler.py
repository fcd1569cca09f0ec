"""Sample the cgroups of running servers and write their usage records.

The hub process holds one :class:`Sampler` per usage folder
(:func:`hub_sampler`). The cgroup spawners open a unit when a server's cgroup
is made and close it before the cgroup is removed; a thread samples every open
unit each ``interval_s`` seconds, so a crash of the hub loses at most one
interval of each server's usage. A runner job writes one ``close`` record at
its end (:func:`record_job_end`) with the figures of its ``RunResult``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from coursehub.meter.cgroupread import read_cgroup_usage
from coursehub.meter.journal import USAGE_DIR_VAR, append_record
from coursehub.meter.records import UsageRecord

log = logging.getLogger(__name__)

#: Default seconds between two samples of a server (one minute: Prometheus' default scrape).
DEFAULT_INTERVAL_S = 60.0
#: Environment variable giving a runner job's course (set in the server's environment).
COURSE_VAR = "COURSEHUB_COURSE_ID"


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
    """

    def __init__(self, folder: Path, source: str, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.folder, self.source, self.interval_s = Path(folder), source, interval_s
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
        for unit in units:
            self._write(self._read(unit, "sample"))
        return len(units)

    def close(self, unit_id: str, exit_reason: str) -> UsageRecord | None:
        """Write the unit's ``close`` record (its last counters); None if it was not open."""
        with self._lock:
            unit = self._units.pop(unit_id, None)
        if unit is None:
            return None
        record = replace(self._read(unit, "close"), exit_reason=exit_reason)
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

    def _read(self, unit: _Unit, event: str) -> UsageRecord:
        usage = read_cgroup_usage(unit.version, unit.dirs)
        now = time.time()
        last = unit.record
        peak = max(last.mem_peak_bytes, usage.mem_peak_bytes or 0, usage.mem_bytes or 0)
        cpu_s = max(last.cpu_s, usage.cpu_s or 0.0)
        gpu_s = unit.n_gpus * (now - last.started_at)
        unit.record = replace(
            last, event=event, at=now, cpu_s=cpu_s, mem_peak_bytes=peak, gpu_s=gpu_s
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

    The user is the job's Unix user, the course ``$COURSEHUB_COURSE_ID``
    (the server's course). Returns the record, or None where no usage folder is
    set or it cannot be written (a job's result never fails on accounting).
    """
    folder = folder or usage_folder()
    if folder is None:
        return None
    user = _user_name()
    record = UsageRecord(
        event="close",
        unit_id=f"job:{socket.gethostname()}:{job_id}",
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


def _user_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
