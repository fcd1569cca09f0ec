"""``run`` and ``submit``: the runner's Python API, used by the CLI, the magic and the benchmark."""

from __future__ import annotations

import queue
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from coursehub.resources import ResourceSpec, parse_duration, parse_mem
from coursehub.runner.core import Backend, Job, JobSpec, RunResult
from coursehub.runner.local import LocalBackend, OutputSink


def make_spec(
    script: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    n_threads: int | None = None,
    cpu_limit: float | None = None,
    gpus: int = 0,
    mem_limit: int | str | None = None,
    timeout_s: float | str | None = None,
    name: str | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | Path | None = None,
    inherit_env: bool = True,
    detached: bool = False,
) -> JobSpec:
    """Return the :class:`JobSpec` for these arguments (text forms ``"4G"`` and ``"30m"`` accepted).

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
        Where to run it (default: a new :class:`LocalBackend`).
    on_output
        Receives the output text as it arrives (local backend only; it is
        called from another thread). The output is always kept in the log.
    **options
        ``module, n_threads, cpu_limit, gpus, mem_limit, timeout_s, name, cwd,
        env, log_path, inherit_env, detached`` as in :func:`make_spec`.

    Raises
    ------
    UsageError
        Bad input (missing script, ``n_threads=0``, ...); nothing has started.
    """
    spec = make_spec(script, args, **options)  # type: ignore[arg-type]
    backend = backend or LocalBackend()
    if isinstance(backend, LocalBackend):
        return backend.submit(spec, on_output=on_output)
    return backend.submit(spec)


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
