"""``coursehub demo [--port 8000] [--data-dir DIR] [--spawner local|slurm] [--exam-servers]``.

The whole system on this machine.

Nothing heavy is imported here; :mod:`coursehub.demo.hub` loads when the
command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError
from coursehub.settings import demo_data_dir


def register(subparsers: Any) -> None:
    """Add ``coursehub demo`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "demo",
        help="run JupyterHub, the course app and a seeded course on this machine",
        description="Start a real JupyterHub (configurable-http-proxy, course app service, "
        "seeded catalog, per-user cgroup limits where possible) until Ctrl-C. "
        "Demo only: one shared password for every account.",
    )
    parser.add_argument("--port", type=int, default=8000, help="public port (default: 8000)")
    parser.add_argument(
        "--ip", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, local only)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the catalog, hub database and homes live "
        "(default: $COURSEHUB_DATA_DIR, else demo/ in the data directory, "
        "~/.local/share/coursehub/demo unless XDG_DATA_HOME is set)",
    )
    parser.add_argument(
        "--spawner",
        choices=("local", "slurm"),
        default="local",
        help="local: each server a process with its course's CPU and memory limits; slurm: "
        "each server a Slurm job with its course's request, on a cluster already running "
        "here (scripts/slurm-single-node start; docs/slurm.md) (default: local)",
    )
    parser.add_argument(
        "--exam-servers",
        action="store_true",
        help="a start during a student's running exam is an exam server: exam home under "
        "DATA_DIR/exams, the exam's notebooks, no terminal (docs/exams.md; local spawner)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C."""
    from coursehub.demo.hub import run_demo

    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {args.port}")
    data_dir = args.data_dir if args.data_dir is not None else demo_data_dir()
    spawner = getattr(args, "spawner", "local")
    exam_servers = getattr(args, "exam_servers", False)
    return run_demo(Path(data_dir), args.port, args.ip, spawner, exam_servers)
