"""The Slurm backend: each job one ``sbatch`` batch job, followed live from this process.

For one job:

1. :func:`coursehub.runner.slurmplan.render_batch_script` writes the batch
   script (pure, golden-tested):
   ``#SBATCH`` lines from :func:`render_sbatch_args` (``--cpus-per-task`` =
   threads, ``--mem``, ``--gres=gpu:N``, ``--time``, partition, account, QOS,
   ``--output``), the same environment as the local backend
   (:func:`coursehub.runner.core.plan_env`: ``thread_env``, ...), then
   ``exec python -m coursehub.runner.slurmjob ... -- python -m
   coursehub.runner.bootstrap TARGET ARGS`` (same command as the local one);
2. ``sbatch --parsable`` takes it on stdin and returns the job id; a refusal
   (unknown partition, a request larger than any node, ...) is one line and
   nothing is queued;
3. a follower thread copies the job's output file to ``on_output`` as it
   grows and asks ``scontrol show job`` for its state (a pending reason is
   printed once), samples ``sstat`` while it runs;
4. at the end the summary comes from ``sacct`` where Slurm keeps accounting,
   else from the usage the job wrote itself (:mod:`coursehub.runner.slurmjob`),
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
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.meter.sampler import record_job_end
from coursehub.runner import slurmcli
from coursehub.runner.core import (
    Backend,
    Job,
    JobSpec,
    OutputSink,
    RunResult,
    default_runs_dir,
    render_summary,
)
from coursehub.runner.local import write_result
from coursehub.runner.slurmplan import (
    USAGE_SUFFIX,
    SlurmPlacement,
    describe_request,
    plan_never_starts,
    plan_result,
    render_batch_script,
)
from coursehub.runner.validate import check_target


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
    """

    def __init__(
        self,
        placement: SlurmPlacement | None = None,
        runs_dir: Path | None = None,
        grace_s: float = 5.0,
        poll_s: float = 0.25,
        python: str = sys.executable,
    ) -> None:
        self.placement = placement or SlurmPlacement.from_env(os.environ)
        self.runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
        self.grace_s, self.poll_s, self.python = grace_s, poll_s, python

    def validate(self, spec: JobSpec) -> None:
        """Check the target here; Slurm checks the resources at submission."""
        check_target(spec)

    def submit(self, spec: JobSpec, on_output: OutputSink | None = None) -> SlurmJob:
        """Render the script and ``sbatch`` it; return the job, followed in a thread.

        Raises
        ------
        UsageError
            Bad target (nothing submitted).
        coursehub.runner.slurmcli.SlurmError
            Slurm refused the job or is unreachable (nothing queued).
        """
        self.validate(spec)
        spec = dataclasses.replace(spec, cwd=spec.cwd or os.getcwd())
        self.runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        output = str(spec.log_path) if spec.log_path else str(self.runs_dir / "slurm-%j.log")
        usage = output.removesuffix(".log") + USAGE_SUFFIX
        script = render_batch_script(spec, self.placement, output, usage, self.python, self.grace_s)
        job_id = slurmcli.sbatch(script, describe_request(spec), self.placement.partition)
        log_path = Path(output.replace("%j", job_id))
        job = SlurmJob(self, spec, job_id, log_path, on_output)
        job.start()
        return job


class SlurmJob(Job):
    """A Slurm batch job, followed from this process until it ends."""

    def __init__(
        self,
        backend: SlurmBackend,
        spec: JobSpec,
        job_id: str,
        log_path: Path,
        on_output: OutputSink | None = None,
    ) -> None:
        self.backend, self.spec, self.job_id, self.log_path = backend, spec, job_id, log_path
        self.on_output = on_output
        self.usage_path = Path(str(log_path).removesuffix(".log") + USAGE_SUFFIX)
        self._state = "queued"
        self._submitted = time.monotonic()
        self.queued_s = 0.0
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"slurm-{job_id}", daemon=True)

    def start(self) -> None:
        """Start following the job."""
        self._thread.start()

    @property
    def state(self) -> str:
        return self._state

    def poll(self) -> RunResult | None:
        if self._error is not None:
            raise self._error
        return self._result

    def wait(self, timeout_s: float | None = None) -> RunResult:
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"Slurm job {self.job_id} still {self._state} after {timeout_s} s")
        result = self.poll()
        assert result is not None
        return result

    def cancel(self) -> None:
        """``scancel`` the job (withdrawn if pending, SIGTERM then SIGKILL if running)."""
        self._cancelled.set()
        with contextlib.suppress(slurmcli.SlurmError):
            slurmcli.scancel(self.job_id)

    def note(self, text: str) -> None:
        """Give a runner line (``[coursehub] ...``) to the output sink."""
        if self.on_output is not None:
            self.on_output(f"[coursehub] {text}\n")

    def _follow(self) -> None:
        reader = _LogReader(self.log_path)
        info: dict[str, str] = {}
        sstat_peak: int | None = None
        last_pending, last_sstat, failures = "", 0.0, 0
        try:
            while True:
                self._emit(reader.read())
                try:
                    latest = slurmcli.job_info(self.job_id)
                    failures = 0
                except slurmcli.SlurmUnreachableError:
                    failures += 1
                    if failures * self.backend.poll_s > 30:
                        raise
                    time.sleep(self.backend.poll_s)
                    continue
                if latest is None:  # forgotten by slurmctld (MinJobAge): it has ended
                    break
                info = latest
                state = info.get("JobState", "")
                if state == "PENDING":
                    pending = info.get("Reason", "")
                    never = plan_never_starts(self.job_id, pending, self.spec, info)
                    if never:
                        raise slurmcli.SlurmError(never)
                    if pending != last_pending and pending not in ("None", ""):
                        self.note(f"Slurm job {self.job_id} pending ({pending})")
                        last_pending = pending
                elif state in slurmcli.FINAL_STATES:
                    break
                else:
                    if self._state == "queued":  # seen running: the wait was this long
                        self.queued_s = time.monotonic() - self._submitted
                    self._state = "running"
                    if time.monotonic() - last_sstat > 2:
                        peak = slurmcli.sstat_peak_rss(self.job_id)
                        sstat_peak = max(filter(None, (sstat_peak, peak)), default=None)
                        last_sstat = time.monotonic()
                time.sleep(self.backend.poll_s)
            self._emit(reader.read(final=True))
            self._result = self._finish(info, sstat_peak)
        except BaseException as exc:
            with contextlib.suppress(slurmcli.SlurmError):  # nothing left queued
                slurmcli.scancel(self.job_id)
            self._error = (
                exc
                if isinstance(exc, slurmcli.SlurmError)
                else slurmcli.SlurmError(f"following Slurm job {self.job_id} failed: {exc}")
            )
        finally:
            self._state = "done"
            self._done.set()

    def _emit(self, text: str) -> None:
        if text and self.on_output is not None:
            self.on_output(text)

    def _finish(self, info: Mapping[str, str], sstat_peak: int | None) -> RunResult:
        usage: dict[str, Any] | None = None
        with contextlib.suppress(OSError, ValueError):
            usage = json.loads(self.usage_path.read_text())
        accounting = slurmcli.sacct_usage(self.job_id)
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
        summary = render_summary(result)
        with contextlib.suppress(OSError), self.log_path.open("a") as log:
            log.write(summary + "\n")
        self._emit(summary + "\n")
        write_result(result, self.log_path.with_suffix(".json"))
        # the course's usage, as a local job's: recorded by the submitting side,
        # whose environment names the usage folder and the course
        record_job_end(
            f"slurm-{self.job_id}",
            time.time() - result.elapsed_s,
            result.elapsed_s,
            result.cpu_s,
            result.peak_rss_bytes,
            result.gpu_peak_bytes,
            self.spec.resources.gpus,
            result.killed_reason or f"exit {result.returncode}",
        )
        return result


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
