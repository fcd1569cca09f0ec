"""Start a JupyterHub subprocess and wait until its API answers (the demo and the tests).

One way to run ``python -m jupyterhub -f CONFIG`` for :mod:`coursehub.demo.hub`,
``tests/hubfixture.py`` and ``benchmarks/bench_sync.py``: the hub runs in its
own session (its process group is stopped as a whole), its output goes to
one log file, and :func:`wait_until_up` polls ``GET {url}/hub/api/`` (the
hub's version, answered without a token: JupyterHub REST API reference,
``/api``) until it answers 200, the hub exits, or the time is up.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from coursehub.errors import CoursehubError

#: Seconds between two polls of the hub's API while it starts.
POLL_INTERVAL_S = 0.3


class HubStartError(CoursehubError):
    """The hub exited before answering (``returncode`` set), or did not answer in time (None)."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        self.returncode = returncode
        super().__init__(message)


def start_hub(
    config_path: Path,
    cwd: Path,
    env: Mapping[str, str],
    log: IO[bytes],
    *,
    preexec_fn: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``python -m jupyterhub -f config_path`` in ``cwd``, in a new session.

    Parameters
    ----------
    config_path
        The ``jupyterhub_config.py`` to load.
    cwd
        Working directory (where relative paths of the config resolve).
    env
        The hub's whole environment.
    log
        Binary file that receives the hub's stdout and stderr.
    preexec_fn, pass_fds
        As for :class:`subprocess.Popen` (the demo resets signal
        dispositions and hands its lock's descriptor down).

    Returns
    -------
    subprocess.Popen
        The hub process, leader of its own process group.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(config_path)],
        cwd=cwd,
        env=dict(env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec_fn,
        pass_fds=tuple(pass_fds),
    )


def api_answers(url: str, timeout_s: float = 2.0) -> bool:
    """Return True when ``GET {url}/hub/api/`` answers 200 (``url``: the hub's public URL)."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/hub/api/", timeout=timeout_s) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until_up(
    url: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Return once the hub at ``url`` answers; poll every :data:`POLL_INTERVAL_S` seconds.

    Raises
    ------
    HubStartError
        If ``process`` exits first (``returncode`` set) or ``timeout_s``
        seconds pass (``returncode`` None; the process is left running: the
        caller stops it).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise HubStartError(
                f"the hub exited (status {process.returncode}) before answering", process.returncode
            )
        if api_answers(url):
            return
        time.sleep(POLL_INTERVAL_S)
    raise HubStartError(f"the hub at {url} did not answer within {timeout_s:g} s")
