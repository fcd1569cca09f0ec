"""The local backend: each job a fresh interpreter on this machine, admitted, confined, watched.

For one job, in order (all in a supervisor thread, so :meth:`LocalBackend.submit`
returns at once):

1. wait for CPU and GPU slots in arrival order (:mod:`coursehub.runner.slots`);
2. make its limits (:mod:`coursehub.runner.limits`): ``systemd-run --scope``
   where systemd is PID 1 and we are root, else a job cgroup
   (:class:`coursehub.resources.cgroups.JobCgroup`, v1 or v2) where the cgroup
   filesystem is writable, else the memory watchdog of
   :mod:`coursehub.runner.monitor` (the run then says ``watchdog``);
3. start ``[python, -m, coursehub.runner.bootstrap, ...]`` in its own session
   (process group) with the explicit environment of :func:`plan_env`,
   holding the slot locks too (``pass_fds``) and the read end of a lifeline
   pipe whose write end only this process holds: the bootstrap's watchdog
   sees it close when this process dies, however it dies (SIGKILL, OOM
   kill, SIGHUP, a killed notebook kernel running ``%coursehub_run``), and
   then stops the job's process group, or, for a ``detached`` job
   (``--no-wait``), keeps the job's time limit itself; the watchdog also
   keeps the time limit while this process lives but no longer enforces it
   (stopped, frozen, blocked), and unlocks the slots when the job ends;
4. copy its output, live, to the log file (mode 0600, its folder 0700 when
   made here; the result file too) and to ``on_output``;
5. on timeout or cancel: SIGTERM to the group, SIGKILL after ``grace_s``;
6. reap it with ``os.wait4`` (CPU time, peak RSS), kill what is left of
   the group, remove the cgroup, release the slots, write ``<job id>.json``.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError
from coursehub.meter.sampler import JobMeter
from coursehub.resources.cgroups import JOBS_PARENT, CgroupStats, JobCgroup
from coursehub.resources.gpus import gpu_inventory
from coursehub.resources.units import describe_duration, describe_mem
from coursehub.runner.gpumem import check_gpu_budget, describe_gpu_queue, gpu_budget_reason
from coursehub.runner.job import Backend, Job, JobSpec, JobState, OutputSink
from coursehub.runner.jobenv import plan_command, plan_env, plan_gpu_env, plan_watchdog_env
from coursehub.runner.limits import confine, kernel_kill_reason, plan_backstop_reason
from coursehub.runner.monitor import TreeMonitor
from coursehub.runner.processgroup import kill_group, sleep_unless_exit
from coursehub.runner.result import RunResult
from coursehub.runner.resultfile import log_path_of, new_job_id
from coursehub.runner.slots import (
    AdmissionCancelledError,
    SlotLease,
    SlotPool,
    default_cpu_budget,
    default_gpu_jobs,
    default_gpu_mem_reserve,
    default_slots_dir,
    describe_queue,
)
from coursehub.runner.validate import check_target
from coursehub.settings import runs_dir as default_runs_dir


class LocalBackend(Backend):
    """Run jobs on this machine.

    Parameters
    ----------
    runs_dir
        Where logs and result files go (default :func:`coursehub.settings.runs_dir`).
    slots
        Admission pool; default: ``$COURSEHUB_SLOTS_DIR`` with
        :func:`default_cpu_budget` CPUs and :func:`default_gpu_jobs` jobs per GPU.
    on_output
        Called with each piece of output text as it arrives (None: log only).
    use_cgroups
        Confine jobs with systemd or cgroups where possible.
    grace_s
        Seconds between SIGTERM and SIGKILL when a job is stopped.
    cgroup_parent
        Name of the cgroup that holds the job cgroups.
    sample_s
        Seconds between two memory samples (the GPU budget is checked at each).
    nvml
        The ``pynvml`` module or an object with its functions, initialised
        (tests give a fake); None: NVML is loaded where it is used.
    """

    def __init__(
        self,
        runs_dir: Path | None = None,
        slots: SlotPool | None = None,
        on_output: OutputSink | None = None,
        use_cgroups: bool = True,
        grace_s: float = 5.0,
        cgroup_parent: str = JOBS_PARENT,
        sample_s: float = 0.1,
        nvml: Any | None = None,
    ) -> None:
        self.runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
        self.on_output = on_output
        self.use_cgroups = use_cgroups
        self.grace_s = grace_s
        self.cgroup_parent = cgroup_parent
        self.sample_s = sample_s
        self.nvml = nvml
        self._slots = slots

    @property
    def slots(self) -> SlotPool:
        """The admission pool (built on first use, with each GPU's memory from NVML)."""
        if self._slots is None:
            totals = [gpu.mem_total_bytes for gpu in gpu_inventory(self.nvml)]
            self._slots = SlotPool(
                default_slots_dir(),
                default_cpu_budget(),
                len(totals),
                default_gpu_jobs(),
                gpu_mem_total=totals,
                gpu_mem_reserve=default_gpu_mem_reserve(),
            )
        return self._slots

    def validate(self, spec: JobSpec) -> None:
        """Check the target, the thread count against the CPU budget and the GPUs asked for."""
        check_target(spec)
        n_threads, gpus = spec.resources.threads, spec.resources.gpus
        if n_threads > self.slots.cpu_budget:
            raise UsageError(
                f"{n_threads} threads is more than this machine's CPU budget of "
                f"{self.slots.cpu_budget} (set COURSEHUB_CPU_BUDGET to change it)"
            )
        if gpus > self.slots.gpu_count:
            raise UsageError(
                f"{gpus} GPU(s) asked for, but this machine has {self.slots.gpu_count}"
            )
        check_gpu_budget(spec.resources.gpu_mem_limit, self.slots.gpu_mem_bytes)

    def submit(self, spec: JobSpec, on_output: OutputSink | None = None) -> LocalJob:
        """Validate ``spec`` then queue and start the job; return at once.

        ``on_output`` (default: the backend's) receives the job's output text,
        from the job's supervisor thread. With ``spec.log_path`` set, the job
        id is that file's stem.
        """
        self.validate(spec)
        job_id = Path(spec.log_path).stem if spec.log_path else new_job_id(spec.display_name)
        log_path = Path(spec.log_path) if spec.log_path else log_path_of(self.runs_dir, job_id)
        log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        job = LocalJob(self, spec, job_id, log_path, on_output or self.on_output)
        job.start()
        return job


class LocalJob(Job):
    """A job of :class:`LocalBackend`; see the module docstring for its life."""

    def __init__(
        self,
        backend: LocalBackend,
        spec: JobSpec,
        job_id: str,
        log_path: Path,
        on_output: OutputSink | None = None,
    ) -> None:
        super().__init__(spec, job_id, log_path, on_output, thread_name=f"job-{job_id}")
        self.backend = backend
        self.pid: int | None = None
        self.cgroup: JobCgroup | None = None
        self.enforcement = "none"
        self.gpu_budget: int | None = None
        self._cancel = threading.Event()
        self._write_lock = threading.Lock()
        # private (0600): a job's output may hold anything its owner printed
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self._log = os.fdopen(os.open(log_path, flags, 0o600), "ab")

    def cancel(self) -> None:
        """Stop the job: withdrawn while queued; SIGTERM, then SIGKILL after ``grace_s``."""
        self._cancel.set()

    def note(self, text: str) -> None:
        """Write a runner line (``[coursehub] ...``) to the log and the output sink."""
        self._record(f"[coursehub] {text}\n")

    def _record(self, text: str) -> None:
        self._emit(text.encode(), text)

    def _emit(self, data: bytes, text: str) -> None:
        with self._write_lock:
            if self._log.closed:  # a straggler holding the pipe after the job's end
                return
            self._log.write(data)
            self._log.flush()
            self._give(text)

    def _execute(self) -> RunResult:
        lease = self._admit()
        if lease is None:
            return self._end_run(-signal.SIGTERM, 0.0, 0.0, 0, "cancelled while queued")
        try:
            return self._run(lease)
        finally:
            lease.release()

    def _failure(self, exc: BaseException) -> BaseException:
        return exc if isinstance(exc, Exception) else CoursehubError(str(exc))

    def _ended(self) -> None:
        self._log.close()

    def _admit(self) -> SlotLease | None:
        res = self.spec.resources
        need = self.backend.slots.gpu_budget(res.gpu_mem_limit) if res.gpus else None

        def show(ahead: int) -> None:
            self.note(describe_gpu_queue(ahead, need) if res.gpus else describe_queue(ahead))

        started = time.monotonic()
        try:
            lease = self.backend.slots.acquire(
                res.threads, res.gpus, show, self._cancel, res.gpu_mem_limit
            )
        except AdmissionCancelledError:
            return None
        self.queued_s = time.monotonic() - started
        return lease

    def _run(self, lease: SlotLease) -> RunResult:
        spec, backend = self.spec, self.backend
        fraction = 1.0 / backend.slots.gpu_jobs if backend.slots.gpu_jobs > 1 else None
        env = plan_env(spec, os.environ, lease.gpu_indices, fraction)
        if lease.gpu_indices:
            env.update(self._gpu_env(lease))
        argv, self.enforcement, unit = plan_command(spec), "watchdog", None
        if backend.use_cgroups:
            argv, self.enforcement, unit, self.cgroup = confine(
                self.job_id, argv, env, spec.resources, backend.cgroup_parent, self.note
            )
        lifeline, keep_alive = os.pipe()  # both close-on-exec; only the read end is passed
        env.update(plan_watchdog_env(spec, backend.grace_s, lifeline, lease.fds))
        self._state = JobState.RUNNING
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=[*lease.fds, lifeline],
            )
        except OSError:
            os.close(keep_alive)
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        finally:
            os.close(lifeline)
        try:
            return self._follow(proc, lease, started, unit)
        finally:
            os.close(keep_alive)

    def _gpu_env(self, lease: SlotLease) -> dict[str, str]:
        """Set the job's GPU budget; return its frameworks' and MPS's variables."""
        pool = self.backend.slots
        self.gpu_budget = pool.gpu_budget(self.spec.resources.gpu_mem_limit)
        totals = [pool.gpu_mem_total[i] for i in lease.gpu_indices if i < len(pool.gpu_mem_total)]
        return plan_gpu_env(self.gpu_budget, min(totals, default=None), pool.gpu_jobs, os.environ)

    def _follow(
        self, proc: subprocess.Popen[bytes], lease: SlotLease, started: float, unit: str | None
    ) -> RunResult:
        """Copy the output, watch, reap and clean up the started job; return its result."""
        self.pid = proc.pid
        ended = False
        try:
            if self.cgroup is not None:
                with contextlib.suppress(ProcessLookupError):  # already gone: nothing to move
                    self.cgroup.add_pid(proc.pid)
            reader = threading.Thread(target=self._copy_output, args=(proc,), daemon=True)
            reader.start()
            status, rusage, monitor, reason = self._watch(proc, started)
            ended = True
            elapsed = time.monotonic() - started
            kill_group(proc.pid)
            reader.join(timeout=5)
        finally:
            kill_group(proc.pid)
            if not ended:
                proc.wait()
            stats = self.cgroup.stats() if self.cgroup is not None else None
            if self.cgroup is not None:
                self.cgroup.remove()
        returncode = os.waitstatus_to_exitcode(status)
        proc.returncode = returncode
        reason = (
            reason
            or kernel_kill_reason(returncode, self.spec.resources.mem_limit, stats, unit)
            or plan_backstop_reason(returncode, elapsed, self.spec.timeout_s)
        )
        peak = max(rusage.ru_maxrss * 1024, monitor.peak_rss_bytes)
        cpu_s = rusage.ru_utime + rusage.ru_stime
        monitor.close()
        return self._end_run(
            returncode,
            elapsed,
            cpu_s,
            peak,
            reason,
            monitor.gpu_peak_bytes,
            lease.gpu_indices,
            stats,
        )

    def _watch(
        self, proc: subprocess.Popen[bytes], started: float
    ) -> tuple[int, resource.struct_rusage, TreeMonitor, str | None]:
        """Sample until the job ends; stop it on timeout, cancel or (watchdog) memory."""
        spec, backend = self.spec, self.backend
        monitor = TreeMonitor(proc.pid, bool(spec.resources.gpus), backend.nvml)
        meter = JobMeter(self.job_id, n_gpus=spec.resources.gpus)  # usage while it runs
        mem_limit = spec.resources.mem_limit if self.enforcement == "watchdog" else None
        reason: str | None = None
        term_at: float | None = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                return status, rusage, monitor, reason
            rss = monitor.sample()
            if meter.folder is not None and meter.due():
                meter.sample(monitor.cpu_s(), monitor.peak_rss_bytes, monitor.gpu_peak_bytes)
            now = time.monotonic()
            gpu_over = gpu_budget_reason(
                monitor.gpu_bytes, monitor.gpu_peak_bytes or 0, self.gpu_budget
            )
            if reason is None and mem_limit is not None and rss > mem_limit:
                reason = f"exceeded its memory limit of {describe_mem(mem_limit)}"
                kill_group(proc.pid)
            elif reason is None and gpu_over:
                reason = gpu_over
                kill_group(proc.pid)
            elif reason is None and spec.timeout_s and now - started > spec.timeout_s:
                reason = f"exceeded its time limit of {describe_duration(spec.timeout_s)}"
                term_at = now
                kill_group(proc.pid, signal.SIGTERM)
            elif reason is None and self._cancel.is_set():
                reason, term_at = "cancelled", now
                kill_group(proc.pid, signal.SIGTERM)
            if term_at is not None and now - term_at > backend.grace_s:
                kill_group(proc.pid)
            sleep_unless_exit(proc.pid, backend.sample_s)

    def _end_run(
        self,
        returncode: int,
        elapsed_s: float,
        cpu_s: float,
        peak: int,
        reason: str | None,
        gpu_peak: int | None = None,
        gpu_indices: tuple[int, ...] = (),
        stats: CgroupStats | None = None,
    ) -> RunResult:
        """Build the job's result from what was measured, then finish the job with it."""
        result = RunResult(
            job_id=self.job_id,
            returncode=returncode,
            elapsed_s=elapsed_s,
            cpu_s=cpu_s,
            n_threads=self.spec.resources.threads,
            peak_rss_bytes=peak,
            gpu_peak_bytes=gpu_peak,
            log_path=self.log_path,
            killed_reason=reason,
            enforcement=self.enforcement,
            queued_s=self.queued_s,
            gpu_indices=gpu_indices,
            cgroup=stats,
        )
        return self._finish(result, self.job_id, len(gpu_indices))

    def _copy_output(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            self._emit(chunk, decoder.decode(chunk))
        proc.stdout.close()
