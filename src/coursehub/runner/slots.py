"""Host-wide admission control: CPU and GPU slots held with ``flock``, granted in arrival order.

Layout of the slots directory (default ``/tmp/coursehub-slots``, or
``$COURSEHUB_SLOTS_DIR``; mode 1777 so that every Unix user can use it)::

    mutex.lock          held briefly around every look at the queue and slots
    cpu-0.slot ...      one file per CPU of the budget
    gpu0-0.slot ...     K files per GPU (at most K jobs on a GPU), each holding
                        the GPU memory budget (bytes) of the job that holds it
    tickets/NNN.ticket  one per waiting job, locked by its waiter

A slot is taken by holding an exclusive ``flock`` on its file. The lock
belongs to the open file description: it is shared by the runner and the
job's process (the descriptors are passed to the child), and the kernel
drops it when the last holder closes it or dies, or when the job's watchdog
unlocks it as the job ends (``LOCK_UN`` acts on the shared description, so
a stopped runner's copies do not keep it). So a job killed with SIGKILL, or
a runner killed or stopped while its job still runs, never leaks a slot
and never frees one too early.

A GPU takes one more job while it has a free slot file and, when its
memory is known (NVML's total, minus a reserve: :attr:`SlotPool.gpu_mem_bytes`), the
budgets written in its held slot files plus the newcomer's fit in that
memory. A job without a budget of its own counts for an equal share
(usable memory / K), as :func:`coursehub.runner.gpumem.plan_gpu_budget`
gives it.

Arrival order: a waiter takes a ticket numbered one above the highest
ticket present and holds a lock on it. Only the waiter whose ticket is the
lowest live one may take slots (strict FIFO: a small job does not overtake
a big one). A ticket whose lock can be taken belongs to a dead waiter and
is ignored (and removed where permissions allow).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.resources.cpus import effective_cpus
from coursehub.resources.units import describe_mem, parse_mem
from coursehub.runner.gpumem import plan_gpu_budget

#: Default directory of the slot files.
DEFAULT_SLOTS_DIR = Path("/tmp/coursehub-slots")


class AdmissionCancelledError(Exception):
    """The job was cancelled while waiting in the queue."""


@dataclass
class SlotLease:
    """Slots held by one job: the open, locked descriptors and the GPUs granted."""

    fds: list[int] = field(default_factory=list)
    gpu_indices: tuple[int, ...] = ()

    def release(self) -> None:
        """Close the descriptors (the locks go when the job's copies are closed too)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def default_cpu_budget() -> int:
    """Return ``$COURSEHUB_CPU_BUDGET``, else ``floor(effective_cpus())`` (at least 1)."""
    configured = os.environ.get("COURSEHUB_CPU_BUDGET")
    return int(configured) if configured else max(1, math.floor(effective_cpus()))


def default_gpu_jobs() -> int:
    """Return ``$COURSEHUB_GPU_JOBS`` (jobs at once on one GPU), else 4."""
    return int(os.environ.get("COURSEHUB_GPU_JOBS", "4"))


def default_gpu_mem_reserve() -> int:
    """Return ``$COURSEHUB_GPU_MEM_RESERVE`` in bytes (``"2G"``), else 2 GiB (kept from jobs)."""
    return parse_mem(os.environ.get("COURSEHUB_GPU_MEM_RESERVE") or "2G")


def default_slots_dir() -> Path:
    """Return ``$COURSEHUB_SLOTS_DIR`` or ``/tmp/coursehub-slots``."""
    configured = os.environ.get("COURSEHUB_SLOTS_DIR")
    return Path(configured) if configured else DEFAULT_SLOTS_DIR


def describe_queue(ahead: int) -> str:
    """Return the line shown to a waiting job: ``"queued: 2 jobs ahead"``."""
    if ahead == 0:
        return "queued: next in line, waiting for free slots"
    return f"queued: {ahead} job{'s' if ahead != 1 else ''} ahead"


class SlotPool:
    """The CPU and GPU slots of one machine.

    Parameters
    ----------
    directory
        Shared directory of the slot files (created mode 1777).
    cpu_budget
        Total threads that running jobs may hold at once (>= 1).
    gpu_count
        GPUs on the machine.
    gpu_jobs
        Jobs allowed at once on one GPU (K >= 1).
    gpu_mem_total
        Total memory of each GPU in bytes (NVML ``nvmlDeviceGetMemoryInfo``),
        in NVML index order; empty: admission by job count alone.
    gpu_mem_reserve
        Bytes of each GPU kept out of admission (driver, other users).
    poll_s
        Seconds between two looks at the queue while waiting.
    """

    def __init__(
        self,
        directory: Path,
        cpu_budget: int,
        gpu_count: int = 0,
        gpu_jobs: int = 4,
        poll_s: float = 0.1,
        gpu_mem_total: Sequence[int] = (),
        gpu_mem_reserve: int = 0,
    ) -> None:
        self.directory = Path(directory)
        self.cpu_budget = cpu_budget
        self.gpu_count = gpu_count
        self.gpu_jobs = gpu_jobs
        self.poll_s = poll_s
        self.gpu_mem_total = tuple(gpu_mem_total)
        self.gpu_mem_reserve = gpu_mem_reserve

    @property
    def gpu_mem_bytes(self) -> tuple[int, ...]:
        """Memory each GPU may give to jobs, bytes: its total minus the reserve (at least 0)."""
        return tuple(max(0, total - self.gpu_mem_reserve) for total in self.gpu_mem_total)

    def gpu_budget(self, declared_bytes: int | None) -> int | None:
        """Return what a job counts for on a GPU, bytes: ``declared_bytes``, else an equal share."""
        usable = min(self.gpu_mem_bytes) if self.gpu_mem_bytes else None
        return plan_gpu_budget(declared_bytes, usable, self.gpu_jobs)

    def acquire(
        self,
        n_cpus: int,
        gpus: int = 0,
        on_wait: Callable[[int], None] | None = None,
        cancelled: threading.Event | None = None,
        gpu_mem_bytes: int | None = None,
    ) -> SlotLease:
        """Wait in arrival order until ``n_cpus`` CPU slots and ``gpus`` GPUs are free; take them.

        Parameters
        ----------
        n_cpus
            CPU slots (the job's threads), 1 <= n_cpus <= cpu_budget.
        gpus
            GPUs, each on a different device, 0 <= gpus <= gpu_count.
        on_wait
            Called with the number of jobs ahead each time it changes while waiting.
        cancelled
            When set, stop waiting.
        gpu_mem_bytes
            The job's GPU memory budget on each of its GPUs, bytes (None: an
            equal share, :meth:`gpu_budget`).

        Raises
        ------
        AdmissionCancelledError
            If ``cancelled`` is set before the slots are granted.
        ValueError
            If the request can never be granted by this pool (a budget larger
            than every GPU's memory included).
        """
        if not 1 <= n_cpus <= self.cpu_budget or not 0 <= gpus <= self.gpu_count:
            raise ValueError(f"cannot grant {n_cpus} CPUs and {gpus} GPUs from {self!r}")
        need = self.gpu_budget(gpu_mem_bytes) if gpus else None
        fitting = [m for m in self.gpu_mem_bytes if need is None or need <= m]
        if gpus and self.gpu_mem_bytes and len(fitting) < gpus:
            raise ValueError(
                f"a GPU memory budget of {describe_mem(need or 0)} fits on no GPU of this "
                f"machine (at most {describe_mem(max(self.gpu_mem_bytes))} each)"
            )
        self._ensure_directory()
        ticket_fd, ticket = self._take_ticket()
        shown: int | None = None
        try:
            while True:
                with self._mutex():
                    ahead = self._tickets_ahead(ticket)
                    lease = self._try_take(n_cpus, gpus, need) if ahead == 0 else None
                    if lease is not None:
                        return lease
                if on_wait is not None and ahead != shown:
                    on_wait(ahead)
                shown = ahead
                if cancelled is not None and cancelled.wait(self.poll_s):
                    raise AdmissionCancelledError
                if cancelled is None:
                    time.sleep(self.poll_s)
        finally:
            with self._mutex():
                with contextlib.suppress(OSError):
                    ticket.unlink()
                os.close(ticket_fd)

    def __repr__(self) -> str:
        return (
            f"SlotPool({str(self.directory)!r}, cpu_budget={self.cpu_budget}, "
            f"gpu_count={self.gpu_count}, gpu_jobs={self.gpu_jobs}, "
            f"gpu_mem_total={self.gpu_mem_total}, gpu_mem_reserve={self.gpu_mem_reserve})"
        )

    def _ensure_directory(self) -> None:
        for directory in (self.directory, self.directory / "tickets"):
            try:
                directory.mkdir(mode=0o1777, parents=True)
                os.chmod(directory, 0o1777)
            except FileExistsError:
                pass

    @contextlib.contextmanager
    def _mutex(self) -> Iterator[None]:
        fd = _open_shared(self.directory / "mutex.lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _take_ticket(self) -> tuple[int, Path]:
        with self._mutex():
            numbers = [_ticket_number(p) for p in (self.directory / "tickets").glob("*.ticket")]
            path = self.directory / "tickets" / f"{max(numbers, default=0) + 1:012d}.ticket"
            fd = _open_shared(path)
            fcntl.flock(fd, fcntl.LOCK_EX)
            return fd, path

    def _tickets_ahead(self, ticket: Path) -> int:
        mine = _ticket_number(ticket)
        ahead = 0
        for path in (self.directory / "tickets").glob("*.ticket"):
            if _ticket_number(path) < mine and _is_held(path):
                ahead += 1
        return ahead

    def _try_take(self, n_cpus: int, gpus: int, need: int | None = None) -> SlotLease | None:
        cpu_paths = [self.directory / f"cpu-{i}.slot" for i in range(self.cpu_budget)]
        cpu_fds = _lock_some(cpu_paths, n_cpus)
        if len(cpu_fds) < n_cpus:
            SlotLease(cpu_fds).release()
            return None
        gpu_fds, gpu_indices = self._take_gpus(gpus, need)
        if len(gpu_indices) < gpus:
            SlotLease(cpu_fds + gpu_fds).release()
            return None
        return SlotLease(cpu_fds + gpu_fds, tuple(gpu_indices))

    def _take_gpus(self, gpus: int, need: int | None) -> tuple[list[int], list[int]]:
        """Take one slot on each of the ``gpus`` least loaded GPUs with a free slot and room.

        Room: the budgets written in the GPU's held slots plus ``need`` (bytes)
        fit in its memory (``gpu_mem_bytes``); each slot taken gets ``need``
        written in it.
        """
        free: list[tuple[int, int, list[int]]] = []
        for index in range(self.gpu_count):
            paths = [self.directory / f"gpu{index}-{k}.slot" for k in range(self.gpu_jobs)]
            locked, held_bytes = _scan_slots(paths, self.gpu_budget(None) or 0)
            if locked and self._has_room(index, held_bytes, need):
                free.append((-len(locked), index, locked))
            elif locked:
                SlotLease(locked).release()
        free.sort()
        fds: list[int] = []
        indices: list[int] = []
        for _, index, gpu_fds in free:
            if len(indices) < gpus:
                fd = gpu_fds.pop(0)
                _write_budget(fd, need)
                fds.append(fd)
                indices.append(index)
            SlotLease(gpu_fds).release()
        return fds, sorted(indices)

    def _has_room(self, index: int, held_bytes: int, need: int | None) -> bool:
        if need is None or index >= len(self.gpu_mem_bytes):
            return True
        return held_bytes + need <= self.gpu_mem_bytes[index]


def _open_shared(path: Path) -> int:
    """Open (creating, mode 0666) a lock file that other users must be able to lock too."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, 0o666)
    return fd


def _lock_some(paths: list[Path], wanted: int) -> list[int]:
    """Lock up to ``wanted`` of ``paths`` without blocking; return the locked descriptors."""
    fds: list[int] = []
    for path in paths:
        if len(fds) == wanted:
            break
        fd = _open_shared(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        fds.append(fd)
    return fds


def _scan_slots(paths: list[Path], default_bytes: int) -> tuple[list[int], int]:
    """Lock the free ones of ``paths``; return their descriptors and the budgets of the held ones.

    A held slot whose budget cannot be read (empty, another user's file
    without read access) counts for ``default_bytes``.
    """
    free: list[int] = []
    held_bytes = 0
    for path in paths:
        fd = _open_shared(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_bytes += _read_budget(fd, default_bytes)
            os.close(fd)
            continue
        free.append(fd)
    return free, held_bytes


def _read_budget(fd: int, default_bytes: int) -> int:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return default_bytes


def _write_budget(fd: int, need: int | None) -> None:
    """Write the job's budget (bytes; empty when unknown) in the slot file it now holds."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        if need is not None:
            os.pwrite(fd, f"{need}\n".encode(), 0)


def _is_held(path: Path) -> bool:
    """Return True if a live process holds the lock of ``path``; remove it where it is stale."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        path.unlink()
    return False


def _ticket_number(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        return 0
