"""The Slurm backend: each job one ``sbatch`` batch job, followed live from this process.

For one job:

1. :func:`coursehub.runner.slurm.plan.render_batch_script` writes the batch
   script (pure, golden-tested):
   ``#SBATCH`` lines from :func:`render_sbatch_args` (``--cpus-per-task`` =
   threads, ``--mem``, ``--gres=gpu:N``, ``--time``, partition, account, QOS,
   ``--output``), the same environment as the local backend
   (:func:`coursehub.runner.jobenv.plan_env`: ``thread_env``, ...), then
   ``exec python -m coursehub.runner.slurm.allocation ... -- python -m
   coursehub.runner.bootstrap TARGET ARGS`` (same command as the local one);
2. ``sbatch --parsable`` takes it on stdin and returns the job id; a refusal
   (unknown partition, a request larger than any node, ...) is one line and
   nothing is queued;
3. a follower thread copies the job's output file to ``on_output`` as it
   grows and asks ``scontrol show job`` for its state (a pending reason is
   printed once), samples ``sstat`` while it runs;
4. at the end the summary comes from ``sacct`` where Slurm keeps accounting,
   else from the usage the job wrote itself (:mod:`coursehub.runner.slurm.allocation`),
   else from ``sstat`` and ``scontrol``; a job Slurm killed (memory, time, node
   failure, ...) gets a reason naming the job and Slurm's state;
5. cancelling (Ctrl-C, :meth:`SlurmJob.cancel`) and any failure while
   following run ``scancel``: nothing is left queued behind the user's back.

The output file and the usage file live in the runs directory, which must be
on a filesystem the compute nodes share (the home directory on clusters).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from coursehub.runner.job import Backend, Job, JobSpec, JobState, OutputSink
from coursehub.runner.result import RunResult
from coursehub.runner.resultfile import log_path_of, slurm_run_id
from coursehub.runner.slurm.allocation import read_usage
from coursehub.runner.slurm.commands import (
    FINAL_STATES,
    SlurmError,
    SlurmUnreachableError,
    UnreachableDeadline,
    job_info,
    sacct_usage,
    sbatch,
    scancel,
    sstat_peak_rss,
)
from coursehub.runner.slurm.plan import (
    SlurmPlacement,
    describe_request,
    plan_never_starts,
    plan_result,
    render_batch_script,
    usage_path,
)
from coursehub.runner.validate import check_target
from coursehub.settings import runs_dir as default_runs_dir

#: Seconds of unreachable Slurm controller after which a followed job gives up (wall clock).
UNREACHABLE_GIVE_UP_S = 30.0


class SlurmBackend(Backend):
    """Run jobs as Slurm batch jobs.

    Parameters
    ----------
    placement
        Partition, account and QOS (default: from ``COURSEHUB_SLURM_*``).
    runs_dir
        Where output and result files go; shared with the compute nodes.
    grace_s
        Seconds between SIGTERM and SIGKILL when the job's own time limit passes.
    poll_s
        Seconds between two looks at the output file and the job's state.
    python
        The interpreter the job runs (the same path on the compute nodes).
    unreachable_give_up_s
        Seconds of unreachable controller, wall clock, after which following
        a job gives up (:class:`~coursehub.runner.slurm.commands.UnreachableDeadline`).
    """

    def __init__(
        self,
        placement: SlurmPlacement | None = None,
        runs_dir: Path | None = None,
        grace_s: float = 5.0,
        poll_s: float = 0.25,
        python: str = sys.executable,
        unreachable_give_up_s: float = UNREACHABLE_GIVE_UP_S,
    ) -> None:
        self.placement = placement or SlurmPlacement.from_env(os.environ)
        self.runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
        self.grace_s, self.poll_s, self.python = grace_s, poll_s, python
        self.unreachable_give_up_s = unreachable_give_up_s

    def validate(self, spec: JobSpec) -> None:
        """Check the target here; Slurm checks the resources at submission."""
        check_target(spec)

    def submit(self, spec: JobSpec, on_output: OutputSink | None = None) -> SlurmJob:
        """Render the script and ``sbatch`` it; return the job, followed in a thread.

        Raises
        ------
        UsageError
            Bad target (nothing submitted).
        coursehub.runner.slurm.commands.SlurmError
            Slurm refused the job or is unreachable (nothing queued).
        """
        self.validate(spec)
        spec = dataclasses.replace(spec, cwd=spec.cwd or os.getcwd())
        self.runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        output = (
            str(spec.log_path)
            if spec.log_path
            else str(log_path_of(self.runs_dir, slurm_run_id("%j")))
        )
        usage = usage_path(output)
        script = render_batch_script(spec, self.placement, output, usage, self.python, self.grace_s)
        job_id = sbatch(script, describe_request(spec), self.placement.partition)
        log_path = Path(output.replace("%j", job_id))
        job = SlurmJob(self, spec, job_id, log_path, on_output)
        job.start()
        return job


class SlurmJob(Job):
    """A Slurm batch job, followed from this process until it ends."""

    label = "Slurm job"

    def __init__(
        self,
        backend: SlurmBackend,
        spec: JobSpec,
        job_id: str,
        log_path: Path,
        on_output: OutputSink | None = None,
    ) -> None:
        super().__init__(spec, job_id, log_path, on_output, thread_name=f"slurm-{job_id}")
        self.backend = backend
        self.usage_path = Path(usage_path(str(log_path)))
        self._submitted = time.monotonic()

    def cancel(self) -> None:
        """``scancel`` the job (withdrawn if pending, SIGTERM then SIGKILL if running)."""
        with contextlib.suppress(SlurmError):
            scancel(self.job_id)

    def note(self, text: str) -> None:
        """Give a runner line (``[coursehub] ...``) to the output sink (Slurm writes the log)."""
        self._give(f"[coursehub] {text}\n")

    def _record(self, text: str) -> None:
        with contextlib.suppress(OSError), self.log_path.open("a") as log:
            log.write(text)
        self._give(text)

    def _failure(self, exc: BaseException) -> BaseException:
        with contextlib.suppress(SlurmError):  # nothing left queued
            scancel(self.job_id)
        if isinstance(exc, SlurmError):
            return exc
        return SlurmError(f"following Slurm job {self.job_id} failed: {exc}")

    def _execute(self) -> RunResult:
        """Follow the job until Slurm says it has ended (or forgets it); return its result."""
        reader = _LogReader(self.log_path)
        info: dict[str, str] = {}
        sstat_peak: int | None = None
        last_pending, last_sstat = "", 0.0
        unreachable = UnreachableDeadline(self.backend.unreachable_give_up_s)
        while True:
            self._give(reader.read())
            asked_at = time.monotonic()
            try:
                latest = job_info(self.job_id, timeout_s=unreachable.call_timeout_s(15))
                unreachable.answered()
            except SlurmUnreachableError:
                unreachable.failed(asked_at)
                if unreachable.expired():
                    raise
                time.sleep(self.backend.poll_s)
                continue
            if latest is None:  # forgotten by slurmctld (MinJobAge): it has ended
                break
            info = latest
            state = info.get("JobState", "")
            if state == "PENDING":
                last_pending = self._note_pending(info, last_pending)
            elif state in FINAL_STATES:
                break
            else:
                if self._state == JobState.QUEUED:  # seen running: the wait was this long
                    self.queued_s = time.monotonic() - self._submitted
                self._state = JobState.RUNNING
                if time.monotonic() - last_sstat > 2:
                    peak = sstat_peak_rss(self.job_id)
                    sstat_peak = max(filter(None, (sstat_peak, peak)), default=None)
                    last_sstat = time.monotonic()
            time.sleep(self.backend.poll_s)
        self._give(reader.read(final=True))
        return self._end_run(info, sstat_peak)

    def _note_pending(self, info: Mapping[str, str], last_pending: str) -> str:
        """Say once why the job is pending; return the reason said.

        Raises
        ------
        coursehub.runner.slurm.commands.SlurmError
            The reason is one no wait removes (the job is then cancelled).
        """
        pending = info.get("Reason", "")
        never = plan_never_starts(self.job_id, pending, self.spec, info)
        if never:
            raise SlurmError(never)
        if pending != last_pending and pending not in ("None", ""):
            self.note(f"Slurm job {self.job_id} pending ({pending})")
            return pending
        return last_pending

    def _end_run(self, info: Mapping[str, str], sstat_peak: int | None) -> RunResult:
        """Read the job's end from Slurm and its usage file, then finish the job with it."""
        usage = read_usage(self.usage_path)
        accounting = sacct_usage(self.job_id)
        result = plan_result(
            self.job_id,
            self.spec,
            self.log_path,
            info,
            usage,
            accounting,
            sstat_peak,
            self.queued_s,
        )
        # the course's usage, as a local job's: recorded by the submitting side,
        # whose environment names the usage folder and the course
        return self._finish(result, slurm_run_id(self.job_id), self.spec.resources.gpus)


class _LogReader:
    """Reads what was appended to a file since the last call, decoding UTF-8 incrementally."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, final: bool = False) -> str:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        return self.decoder.decode(data, final=final)
