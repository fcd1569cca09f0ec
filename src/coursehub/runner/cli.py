"""``coursehub run [--backend B] [--threads N] [--gpus N] [--mem 4G] [--timeout 30m] -- SCRIPT``.

Other options: ``--no-wait``, ``--name``, ``--log``, and for ``--backend slurm``
``--partition``, ``--account``, ``--qos``.

``SCRIPT`` may also be ``-m MODULE`` (``coursehub run --threads 2 -- -m
coursehub.pendulum.train lstm 5 2``). The options are read as text and
checked here, so that a bad value gives one ``coursehub: error: ...`` line and
exit status 2 with nothing started. The run ends with one summary line; the
exit status is the job's (128 + N for a job ended by signal N).
``coursehub run status JOB`` and ``coursehub run cancel JOB`` (without ``--``:
``coursehub run -- status`` runs a script called ``status``) work for both
backends; the backend defaults to ``$COURSEHUB_RUNNER_BACKEND``, else local.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError
from coursehub.runner.gpumem import GPU_MEM_LIMIT_VAR


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options shared by ``coursehub run`` and ``%coursehub_run``."""
    parser.add_argument(
        "--backend",
        metavar="NAME",
        help="local or slurm (default: $COURSEHUB_RUNNER_BACKEND, else local)",
    )
    parser.add_argument("--partition", help="Slurm partition (default: $COURSEHUB_SLURM_PARTITION)")
    parser.add_argument("--account", help="Slurm account (default: $COURSEHUB_SLURM_ACCOUNT)")
    parser.add_argument("--qos", help="Slurm QOS (default: $COURSEHUB_SLURM_QOS)")
    parser.add_argument(
        "--threads", default="1", metavar="N", help="threads (CPU slots), default 1"
    )
    parser.add_argument("--gpus", default="0", metavar="N", help="GPUs, default 0")
    parser.add_argument("--mem", metavar="SIZE", help="memory limit, e.g. 4G or 512M")
    parser.add_argument(
        "--gpu-mem",
        metavar="SIZE",
        help="GPU memory budget of the job, e.g. 1.5G, CUDA context included "
        "(default with --gpus: $COURSEHUB_GPU_MEM_LIMIT, the course profile's, "
        "else an equal share of the GPU)",
    )
    parser.add_argument("--timeout", metavar="DURATION", help="time limit, e.g. 30m, 90s, 1h")
    parser.add_argument("--name", help="short name for the job id and log")
    parser.add_argument("--log", metavar="PATH", help="log file (default: in the runs directory)")
    parser.add_argument(
        "-m",
        dest="module_name",
        metavar="MODULE",
        help="run a module, as python -m does (its arguments follow)",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- SCRIPT [ARGS...]",
        help="script and its arguments, or -m MODULE and its arguments",
    )


def register(subparsers: Any) -> None:
    """Add ``coursehub run`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "run",
        help="run a script in a fresh interpreter with explicit threads, memory, GPUs",
        description="Run a script (or -m MODULE) in a fresh interpreter with explicit threads, "
        "memory and time limits and GPUs, here or as a Slurm job, then print a one-line "
        "summary. 'coursehub run status JOB' and 'coursehub run cancel JOB' follow a job.",
    )
    add_run_arguments(parser)
    parser.add_argument("--no-wait", action="store_true", help="start it and return; see the log")
    # set by --no-wait on the runner it starts: the job outlives that runner, with its time limit
    parser.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=run_command)


def parse_count(text: str, option: str, minimum: int) -> int:
    """Return ``text`` as an integer >= ``minimum``, or raise UsageError naming ``option``."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        kind = "positive" if minimum > 0 else "non-negative"
        raise UsageError(f"{option} must be a {kind} integer, got {text!r}")
    return value


def spec_options(args: argparse.Namespace) -> tuple[str, list[str], dict[str, Any]]:
    """Return ``(script, script_args, options)`` for :func:`coursehub.runner.api.make_spec`.

    Raises
    ------
    UsageError
        No script, a bad ``--threads``/``--gpus`` value, or a ``--log`` in no folder.
    """
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    module = command[:1] == ["-m"]
    if module:
        command = command[1:]
    if args.module_name:
        module = True
        command = [args.module_name, *command]
    if not command:
        raise UsageError("no script given: coursehub run [OPTIONS] -- SCRIPT [ARGS...]")
    if args.log and not Path(args.log).parent.is_dir():  # a --no-wait runner would fail unseen
        raise UsageError(f"--log {args.log}: folder {Path(args.log).parent} does not exist")
    gpus = parse_count(args.gpus, "--gpus", 0)
    gpu_mem = getattr(args, "gpu_mem", None)
    if gpu_mem is None and gpus:
        gpu_mem = os.environ.get(GPU_MEM_LIMIT_VAR) or None
    options: dict[str, Any] = {
        "module": module,
        "n_threads": parse_count(args.threads, "--threads", 1),
        "gpus": gpus,
        "mem_limit": args.mem,
        "gpu_mem_limit": gpu_mem,
        "timeout_s": args.timeout,
        "name": args.name,
        "log_path": args.log,
        "detached": bool(getattr(args, "detached", False)),
    }
    return command[0], command[1:], options


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """Return the keyword arguments of :func:`coursehub.runner.api.make_backend`."""
    return {
        "name": args.backend,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
    }


def control_command(args: argparse.Namespace) -> tuple[str, str] | None:
    """Return ``("status"|"cancel", JOB)`` for ``coursehub run status|cancel JOB``, else None."""
    command = list(args.command)
    if not command or command[0] not in ("status", "cancel"):
        return None
    if len(command) != 2:
        raise UsageError(f"usage: coursehub run {command[0]} JOB (one job id)")
    return command[0], command[1]


def run_command(args: argparse.Namespace) -> int:
    """Carry out ``coursehub run``; return the job's exit status."""
    from coursehub.runner.api import make_backend, make_spec, run
    from coursehub.runner.budgetgate import check_budget
    from coursehub.runner.slurm.backend import SlurmBackend

    control = control_command(args)
    if control is not None:
        from coursehub.runner.control import cancel_job, job_status

        action, job_id = control
        print(job_status(job_id) if action == "status" else cancel_job(job_id))
        return 0
    script, script_args, options = spec_options(args)
    backend = make_backend(**backend_options(args))
    spec = make_spec(script, script_args, **options)
    backend.validate(spec)
    check_budget(spec.resources.gpus)  # before --no-wait returns; run() asks again
    if args.no_wait and isinstance(backend, SlurmBackend):
        job = backend.submit(spec)
        print(f"[coursehub] submitted Slurm job {job.job_id}: output in {job.log_path}")
        return 0
    if args.no_wait:
        return start_detached(args, backend)
    pid_file = Path(args.log).with_suffix(".pid") if args.detached and args.log else None
    if pid_file is not None:  # for coursehub run status/cancel
        pid_file.write_text(f"{os.getpid()}\n")
    try:
        with stop_on_hangup():
            result = run(script, script_args, backend=backend, **options)
    finally:
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


@contextlib.contextmanager
def stop_on_hangup() -> Iterator[None]:
    """Turn SIGHUP (terminal closed) and SIGTERM into Ctrl-C while a job runs in the foreground.

    :func:`coursehub.runner.api.run` then cancels the job (SIGTERM, SIGKILL
    after the grace period), waits for it and writes its result; a runner
    killed outright is covered by the job's watchdog instead.
    """

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_detached(args: argparse.Namespace, backend: Any) -> int:
    """Start ``coursehub run`` (without ``--no-wait``) in its own session; print its log path."""
    from coursehub.runner.api import make_spec
    from coursehub.runner.resultfile import log_path_of, new_job_id

    script, script_args, options = spec_options(args)
    if not args.log:  # the detached runner's --log must name a folder that exists
        Path(backend.runs_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    log = args.log or str(
        log_path_of(
            Path(backend.runs_dir),
            new_job_id(make_spec(script, script_args, **options).display_name),
        )
    )
    argv = [
        sys.executable,
        "-m",
        "coursehub",
        "run",
        "--detached",
        "--threads",
        args.threads,
        "--gpus",
        args.gpus,
    ]
    for flag, value in (
        ("--mem", args.mem),
        ("--gpu-mem", options["gpu_mem_limit"]),
        ("--timeout", args.timeout),
        ("--name", args.name),
    ):
        argv += [flag, value] if value else []
    argv += ["--log", log, "--", *(["-m"] if options["module"] else []), script, *script_args]
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=dict(os.environ),
    )
    job_id = Path(log).stem
    print(
        f"[coursehub] submitted job {job_id}: output in {log} "
        f"(result in {log.removesuffix('.log')}.json)"
    )
    return 0
