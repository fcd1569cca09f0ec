"""A job: its spec, its states, and the Backend/Job pair every backend implements.

One interface, one class per backend (model: submitit ``core/core.py``):
:meth:`Backend.submit` takes a :class:`JobSpec` and returns a :class:`Job`
that can be polled, waited for, cancelled and read. :class:`Job` owns what
every backend's job shares: its state (:class:`JobState`), polling, waiting,
and finishing (the summary line, the result file of
:mod:`coursehub.runner.resultfile`, the usage record of
:mod:`coursehub.meter.sampler`); a backend's job
(:class:`coursehub.runner.local.LocalJob`,
:class:`coursehub.runner.slurm.backend.SlurmJob`) keeps only what differs:
how it is followed, cancelled, and where its runner lines go.
"""

from __future__ import annotations

import enum
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.meter.sampler import record_job_end
from coursehub.resources.spec import ResourceSpec
from coursehub.runner.result import RunResult, render_summary
from coursehub.runner.resultfile import result_path, write_result

#: Receives a job's output text as it arrives (from another thread).
OutputSink = Callable[[str], None]


class JobState(enum.StrEnum):
    """Where a job is in its life; the values are the strings shown and stored."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True)
class JobSpec:
    """What to run and with which resources.

    Parameters
    ----------
    target
        Path of a Python script, or a module name when ``module`` is True
        (``coursehub.pendulum.train``).
    args
        Arguments given to the script (its ``sys.argv[1:]``).
    module
        Run ``target`` as ``python -m target``.
    resources
        Threads, CPU quota, memory limit (bytes) and GPUs.
    timeout_s
        Wall-clock limit of the run in seconds (queue time not counted), or None.
    name
        Short name used in the job id and log file name; defaults to the target's.
    cwd
        Working directory of the job; defaults to the caller's.
    env
        Extra environment variables for the job (they win over the caller's
        environment; the thread variables win over them).
    log_path
        Where the output is kept; defaults to ``RUNS_DIR/<job id>.log``.
    inherit_env
        Start from the caller's environment (True) or from ``env`` alone
        (False: autograding passes an allow-listed environment).
    detached
        The job outlives its runner (``coursehub run --no-wait``); its time
        limit still holds. Otherwise the job is stopped when the runner dies.
    """

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    timeout_s: float | None = None
    name: str | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    inherit_env: bool = True
    detached: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise UsageError(
                f"timeout must be a positive number of seconds, got {self.timeout_s!r}"
            )

    @property
    def display_name(self) -> str:
        """The job's short name: ``name``, else the script's stem or the module's last part."""
        if self.name:
            return self.name
        return self.target.rsplit(".", 1)[-1] if self.module else Path(self.target).stem


class Job(ABC):
    """A submitted job. ``poll`` never blocks; ``wait``/``result`` block until it ends.

    A subclass gives :meth:`_execute` (run or follow the job to its end, in
    the job's own thread, started by :meth:`start`), :meth:`cancel` and
    :meth:`_record`, and calls :meth:`_finish` with the job's result.

    Parameters
    ----------
    spec
        What runs.
    job_id
        The job's id (the backend's).
    log_path
        The file holding the job's output.
    on_output
        Receives the job's output text as it arrives, from the job's thread
        (None: the output is only kept in the log).
    """

    #: How the job is named in messages: ``job 20250101-...``, ``Slurm job 123``.
    label = "job"

    def __init__(
        self,
        spec: JobSpec,
        job_id: str,
        log_path: Path,
        on_output: OutputSink | None = None,
        thread_name: str | None = None,
    ) -> None:
        self.spec, self.job_id, self.log_path, self.on_output = spec, job_id, log_path, on_output
        self.queued_s = 0.0
        self._state = JobState.QUEUED
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run_to_end, name=thread_name or f"job-{job_id}", daemon=True
        )

    def start(self) -> None:
        """Start the job's thread (it runs :meth:`_execute`)."""
        self._thread.start()

    @property
    def state(self) -> JobState:
        """:attr:`JobState.QUEUED`, :attr:`JobState.RUNNING` or :attr:`JobState.DONE`."""
        return self._state

    def poll(self) -> RunResult | None:
        """Return the result if the job has ended, else None.

        Raises
        ------
        Exception
            What made following the job fail (the backend's error).
        """
        if self._error is not None:
            raise self._error
        return self._result

    def wait(self, timeout_s: float | None = None) -> RunResult:
        """Block until the job ends and return its result.

        Raises
        ------
        TimeoutError
            If ``timeout_s`` (seconds) passes first (the job keeps running).
        """
        if not self._done.wait(timeout_s):
            raise TimeoutError(
                f"{self.label} {self.job_id} still {self._state} after {timeout_s} s"
            )
        result = self.poll()
        assert result is not None
        return result

    @abstractmethod
    def cancel(self) -> None:
        """Stop the job (queued: withdrawn; running: SIGTERM, then SIGKILL after a grace period)."""

    def result(self) -> RunResult:
        """Block until the job ends and return its result (submitit's name for :meth:`wait`)."""
        return self.wait()

    def done(self) -> bool:
        """True once the job has ended."""
        return self.poll() is not None

    def output(self) -> str:
        """Return the output written so far (stdout and stderr interleaved)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @abstractmethod
    def _execute(self) -> RunResult:
        """Run or follow the job to its end (in the job's thread); return its result."""

    @abstractmethod
    def _record(self, text: str) -> None:
        """Add runner text (whole lines) to the job's log and give it to the output sink."""

    def _failure(self, exc: BaseException) -> BaseException:
        """Return what :meth:`poll` raises after ``exc`` stopped :meth:`_execute`."""
        return exc

    def _ended(self) -> None:
        """Release what the job held while it ran (called once, whatever the end)."""
        return None

    def _give(self, text: str) -> None:
        """Give ``text`` to the output sink, if there is one and the text is not empty."""
        if text and self.on_output is not None:
            self.on_output(text)

    def _run_to_end(self) -> None:
        try:
            self._result = self._execute()
        except BaseException as exc:  # the caller of wait() gets it
            self._error = self._failure(exc)
        finally:
            self._state = JobState.DONE
            self._ended()
            self._done.set()

    def _finish(self, result: RunResult, usage_id: str, n_gpus: int) -> RunResult:
        """End the job with ``result``: summary line, result file, usage record; return it.

        ``usage_id`` names the job in the course's usage records, ``n_gpus``
        the GPUs it held.
        """
        self._record(render_summary(result) + "\n")
        write_result(result, result_path(self.log_path))
        record_job_end(
            usage_id,
            time.time() - result.elapsed_s,
            result.elapsed_s,
            result.cpu_s,
            result.peak_rss_bytes,
            result.gpu_peak_bytes,
            n_gpus,
            result.killed_reason or f"exit {result.returncode}",
        )
        return result


class Backend(ABC):
    """Runs :class:`JobSpec` s somewhere: this machine, Slurm, ..."""

    @abstractmethod
    def validate(self, spec: JobSpec) -> None:
        """Check that ``spec`` can run here, before anything starts.

        Raises
        ------
        UsageError
            Missing script, more threads or GPUs than the backend has, ...
        """

    @abstractmethod
    def submit(self, spec: JobSpec, on_output: OutputSink | None = None) -> Job:
        """Validate ``spec``, start (or queue) the job and return its handle.

        ``on_output`` receives the job's output text as it arrives, from
        another thread (None: the output is only kept in the job's log).
        """
