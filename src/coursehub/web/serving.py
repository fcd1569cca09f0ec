"""The WSGI servers behind ``coursehub web serve``: waitress, or gunicorn with several processes.

One Python process serves one request at a time on the CPU (the GIL), so a
single threaded process uses about one core however many threads it has.
With ``workers == 1`` the app is served by waitress in this process (the
default, also for the hub-managed service). With ``workers > 1`` gunicorn's
``gthread`` workers are forked from this process, each with ``threads``
threads: one worker per core lets the course page use every core (measured
by ``benchmarks/bench_web.py``). The app is created once before the fork, so
a bad configuration or an outdated schema is refused before anything
listens; its database connections are closed first, so that no worker shares
a connection with another process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coursehub.errors import UsageError


@dataclass(frozen=True)
class ServerPlan:
    """How to serve: address, processes and threads per process."""

    host: str
    port: int
    workers: int
    threads: int


def plan_workers(requested: str, cpus: float) -> int:
    """Return the number of worker processes for ``--workers`` (an integer, or ``auto``).

    Parameters
    ----------
    requested : str
        ``"auto"`` (one per usable CPU, at least 1) or a positive integer.
    cpus : float
        CPUs this process may use (:func:`coursehub.resources.cpus.effective_cpus`).

    Raises
    ------
    UsageError
        If ``requested`` is neither ``auto`` nor an integer >= 1.
    """
    if requested == "auto":
        return max(1, int(cpus))
    if not requested.isdigit() or int(requested) < 1:
        raise UsageError(f"--workers: expected 'auto' or an integer >= 1, got {requested!r}")
    return int(requested)


def plan_gunicorn_options(plan: ServerPlan) -> dict[str, Any]:
    """Return gunicorn settings for ``plan``: threaded workers, the app loaded before the fork."""
    return {
        "bind": [f"{plan.host}:{plan.port}"],
        "workers": plan.workers,
        "threads": plan.threads,
        "worker_class": "gthread",
        "preload_app": True,
        "graceful_timeout": 10,
        "proc_name": "coursehub-web",
        "accesslog": None,
        "control_socket_disable": True,  # no runtime-control socket in the home directory
    }


def serve_waitress(app: Any, plan: ServerPlan) -> None:
    """Serve ``app`` in this process with waitress (``plan.threads`` threads) until interrupted."""
    from waitress import serve

    serve(app, host=plan.host, port=plan.port, threads=plan.threads, ident="coursehub")


def serve_gunicorn(app: Any, plan: ServerPlan) -> None:
    """Serve ``app`` with gunicorn: ``plan.workers`` forked processes until interrupted.

    Raises
    ------
    UsageError
        If gunicorn is not installed (it runs on Unix only).
    """
    try:
        from gunicorn.app.base import BaseApplication
    except ImportError:
        raise UsageError(
            "--workers > 1 needs gunicorn (pip install 'coursehub[web]', Unix only)"
        ) from None
    from coursehub.web.database import ENGINE_KEY

    app.extensions[ENGINE_KEY].dispose()  # each worker opens its own connections

    class Server(BaseApplication):
        def load_config(self) -> None:
            for key, value in plan_gunicorn_options(plan).items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return app

    Server().run()
