"""``run`` and ``submit``: the runner's Python API, used by the CLI, the magic and the benchmark."""

from __future__ import annotations

import os
import queue
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.resources.spec import ResourceSpec
from coursehub.resources.units import parse_duration, parse_mem, parse_optional_mem
from coursehub.runner.budgetgate import check_budget
from coursehub.runner.job import Backend, Job, JobSpec, OutputSink
from coursehub.runner.local import LocalBackend
from coursehub.runner.result import RunResult
from coursehub.runner.slurm.backend import SlurmBackend
from coursehub.runner.slurm.plan import SlurmPlacement

#: The variable naming the default backend (``local`` or ``slurm``).
BACKEND_VAR = "COURSEHUB_RUNNER_BACKEND"
BACKENDS = ("local", "slurm")


def backend_name(name: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Return ``name``, else ``$COURSEHUB_RUNNER_BACKEND``, else ``"local"``.

    Raises
    ------
    UsageError
        An unknown name, saying where it came from.
    """
    env = os.environ if env is None else env
    chosen = name or env.get(BACKEND_VAR) or "local"
    if chosen not in BACKENDS:
        where = "--backend" if name else BACKEND_VAR
        raise UsageError(f"unknown runner backend {chosen!r} ({where}): choose local or slurm")
    return chosen


def make_backend(
    name: str | None = None,
    *,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
) -> Backend:
    """Return the backend called ``name`` (default: :func:`backend_name`).

    For Slurm, ``partition``, ``account`` and ``qos`` win over
    ``COURSEHUB_SLURM_PARTITION``, ``_ACCOUNT`` and ``_QOS``; giving them
    to the local backend is a :class:`UsageError`.
    """
    chosen = backend_name(name)
    if chosen == "slurm":
        defaults = SlurmPlacement.from_env(os.environ)
        return SlurmBackend(
            SlurmPlacement(
                partition or defaults.partition, account or defaults.account, qos or defaults.qos
            )
        )
    placement = (("partition", partition), ("account", account), ("qos", qos))
    given = [f"--{k}" for k, v in placement if v]
    if given:
        raise UsageError(f"{', '.join(given)} only apply to --backend slurm")
    return LocalBackend()


def make_spec(
    script: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    n_threads: int | None = None,
    cpu_limit: float | None = None,
    gpus: int = 0,
    mem_limit: int | str | None = None,
    gpu_mem_limit: int | str | None = None,
    timeout_s: float | str | None = None,
    name: str | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | Path | None = None,
    inherit_env: bool = True,
    detached: bool = False,
) -> JobSpec:
    """Return the :class:`JobSpec` for these arguments (text forms ``"4G"`` and ``"30m"`` accepted).

    ``gpu_mem_limit``: the job's GPU memory budget (bytes or ``"1.5G"``;
    None or blank: an equal share of its GPU), :mod:`coursehub.runner.gpumem`.

    Raises
    ------
    UsageError
        On an unparsable memory size or duration, or out-of-range resources.
    """
    resources = ResourceSpec(
        cpu_limit=cpu_limit,
        mem_limit=None if mem_limit is None else parse_mem(mem_limit),
        n_threads=n_threads,
        gpus=gpus,
        gpu_mem_limit=parse_optional_mem(gpu_mem_limit, "--gpu-mem"),
    )
    return JobSpec(
        target=str(script),
        args=tuple(args),
        module=module,
        resources=resources,
        timeout_s=None if timeout_s is None else parse_duration(timeout_s),
        name=name,
        cwd=None if cwd is None else str(cwd),
        env=dict(env or {}),
        log_path=None if log_path is None else Path(log_path),
        inherit_env=inherit_env,
        detached=detached,
    )


def submit(
    script: str,
    args: Sequence[str] = (),
    *,
    backend: Backend | None = None,
    on_output: OutputSink | None = None,
    **options: object,
) -> Job:
    """Start ``script`` (or module, with ``module=True``) in a fresh interpreter; return its Job.

    Parameters
    ----------
    script, args
        The script path (or module name) and its arguments.
    backend
        Where to run it (default: :func:`make_backend`, i.e.
        ``$COURSEHUB_RUNNER_BACKEND`` or the local backend).
    on_output
        Receives the output text as it arrives (called from another
        thread). The output is always kept in the log.
    **options
        ``module, n_threads, cpu_limit, gpus, mem_limit, timeout_s, name, cwd,
        env, log_path, inherit_env, detached`` as in :func:`make_spec`.

    Raises
    ------
    UsageError
        Bad input (missing script, ``n_threads=0``, ...), or the user's weekly
        budget of the server's course used up (:mod:`coursehub.runner.budgetgate`);
        nothing has started.
    """
    spec = make_spec(script, args, **options)  # type: ignore[arg-type]
    check_budget(spec.resources.gpus)
    backend = backend or make_backend()
    return backend.submit(spec, on_output=on_output)


def run(
    script: str,
    args: Sequence[str] = (),
    *,
    backend: Backend | None = None,
    on_output: OutputSink | None = None,
    **options: object,
) -> RunResult:
    """Run ``script`` in a fresh interpreter with explicit resources; wait; return its result.

    Same parameters as :func:`submit`; the output is streamed to
    ``on_output`` (default: this process's ``sys.stdout``) from the calling
    thread, so it lands in the right notebook cell. Ctrl-C cancels the job
    (SIGTERM, then SIGKILL), waits for it, and re-raises KeyboardInterrupt.

    Returns
    -------
    RunResult
        Return code, elapsed and CPU seconds, peak memory, log path, killed reason.
    """
    pending: queue.SimpleQueue[str] = queue.SimpleQueue()
    job = submit(script, args, backend=backend, on_output=pending.put, **options)
    sink = on_output or _write_stdout
    try:
        _pump(job, pending, sink)
    except KeyboardInterrupt:
        job.cancel()
        _pump(job, pending, sink)
        raise
    return job.result()


def _pump(job: Job, pending: queue.SimpleQueue[str], sink: Callable[[str], None]) -> None:
    """Pass output to ``sink`` until the job has ended and everything it wrote is out."""
    while True:
        try:
            sink(pending.get(timeout=0.05))
        except queue.Empty:
            if job.done():
                break
    while not pending.empty():
        sink(pending.get_nowait())


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
