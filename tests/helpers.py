"""Helpers shared by the tests: a free port, waiting for a condition, golden files, SQL counting.

Import them as ``from helpers import free_port, wait_until, assert_matches_golden``
(pytest puts ``tests/`` on ``sys.path``; the benchmarks insert it themselves).
One home each, so that a fix (a longer poll, a better failure message) reaches
every test. :func:`free_port` hands each pytest-xdist worker ports from its own
block below the kernel's ephemeral range, so that two workers starting hubs at
once never pick the same port (the demo's ``bind(0)`` can give a port that
another worker was handed a moment before and has not bound yet).
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from coursehub.demo.ports import LOOPBACK

__all__ = [
    "GOLDEN_DIR",
    "WaitTimeoutError",
    "assert_matches_golden",
    "counted_statements",
    "free_port",
    "wait_until",
]

T = TypeVar("T")

#: First port of the blocks and each block's size: ports 10000-31999, below
#: Linux's default ``net.ipv4.ip_local_port_range`` (32768-60999), so that no
#: outgoing connection's ephemeral port takes one either.
PORT_BLOCKS_START = 10_000
PORT_BLOCK_SIZE = 2_000
PORT_BLOCKS = 11


def _port_block() -> range:
    """This process's block: xdist worker ``gwN`` gets block N + 1, a serial run block 0."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = PORT_BLOCKS_START + (index % PORT_BLOCKS) * PORT_BLOCK_SIZE
    return range(start, start + PORT_BLOCK_SIZE)


_next_ports = itertools.cycle(_port_block())


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that is free now and this worker's alone.

    The ports come round-robin from this worker's block (:func:`_port_block`),
    skipping any that cannot be bound now. Raises RuntimeError when none of the
    block's 2,000 ports is free.
    """
    for _ in range(PORT_BLOCK_SIZE):
        port = next(_next_ports)
        with socket.socket() as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {_port_block()}")


#: Folder of the golden files (see its README.md).
GOLDEN_DIR = Path(__file__).parent / "golden"

#: Environment variable that makes :func:`assert_matches_golden` rewrite the files.
REGENERATE_ENV = "COURSEHUB_REGENERATE_GOLDEN"


class WaitTimeoutError(AssertionError):
    """:func:`wait_until` gave up: the condition did not hold within its time."""


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float = 30.0,
    interval_s: float = 0.05,
    what: str = "the condition",
) -> T:
    """Call ``predicate`` every ``interval_s`` until it returns a true value; return that value.

    Parameters
    ----------
    predicate : callable
        Called with no argument, at least once. To stop waiting early (the
        process under test died), let it raise: the exception propagates.
    timeout_s : float
        Seconds to wait in all (monotonic clock).
    interval_s : float
        Seconds between two calls.
    what : str
        What is awaited, for the failure message ("the job's pid file").

    Returns
    -------
    The first true value ``predicate`` returned.

    Raises
    ------
    WaitTimeoutError
        (an ``AssertionError``) naming ``what``, the time waited and the last
        value, if ``predicate`` returned no true value within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(f"{what}: not met after {timeout_s:g} s (last value: {value!r})")
        time.sleep(interval_s)


def assert_matches_golden(text: str, name: str) -> None:
    """Assert that ``text`` equals the golden file ``tests/golden/<name>``, byte for byte.

    Regenerate the files after an intended change with::

        COURSEHUB_REGENERATE_GOLDEN=1 .venv/bin/pytest tests/test_grading.py tests/test_bench.py

    With ``COURSEHUB_REGENERATE_GOLDEN=1`` the file is (re)written with
    ``text`` and the assertion passes; review the change with ``git diff
    tests/golden`` before committing it (see ``tests/golden/README.md``).

    Parameters
    ----------
    text : str
        The rendered text, compared without newline translation (UTF-8).
    name : str
        File name inside :data:`GOLDEN_DIR`, e.g. ``"grading_course_config.py.golden"``.

    Raises
    ------
    AssertionError
        With a unified diff (golden file first) if they differ, or how to
        create the file if it is missing.
    """
    path = GOLDEN_DIR / name
    if os.environ.get(REGENERATE_ENV) == "1":
        path.write_bytes(text.encode("utf-8"))
        return
    if not path.is_file():
        raise AssertionError(f"no golden file {path}; create it with {REGENERATE_ENV}=1 pytest ...")
    expected = path.read_bytes().decode("utf-8")
    if text != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"golden/{name}",
            tofile="rendered",
        )
        raise AssertionError(
            f"rendered text differs from golden/{name} "
            f"(regenerate with {REGENERATE_ENV}=1 if intended):\n{''.join(diff)}"
        )


@contextmanager
def counted_statements(app: Any) -> Iterator[list[str]]:
    """Collect the SQL statements the course app's engine runs inside the block."""
    from sqlalchemy import event

    from coursehub.web.database import ENGINE_KEY

    statements: list[str] = []
    engine = app.extensions[ENGINE_KEY]

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


# --- pages of the course app -----------------------------------------------------------

#: Flask-WTF's hidden field in a rendered form.
_CSRF_FIELD = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


def csrf_token(html: str) -> str:
    """The CSRF token of the first form of a rendered page (AssertionError if it has none)."""
    match = _CSRF_FIELD.search(html)
    assert match, f"no CSRF token in the page: {html[:300]}"
    return match.group(1)


class PageActions:
    """Sign in as someone, read a page, post its form: the course app's test client in a word.

    ``who`` is a key of :data:`coursehub.web.testing.IDENTITIES` (``"teacher"``,
    ``"student"``, ``"admin"``...); its identity travels in the test header the app
    trusts in test mode (:func:`coursehub.web.testing.identity_headers`).
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def headers(self, who: str) -> dict[str, str]:
        """The headers that sign ``who`` in."""
        from coursehub.web.testing import IDENTITIES, identity_headers

        return identity_headers(IDENTITIES[who])

    def get(self, path: str, who: str) -> Any:
        """``GET path`` as ``who``; the response."""
        return self.client.get(path, headers=self.headers(who))

    def text(self, path: str, who: str) -> str:
        """The text of ``GET path`` as ``who``."""
        return str(self.get(path, who).get_data(as_text=True))

    def csrf(self, path: str, who: str) -> str:
        """The CSRF token of the form on ``path`` as ``who`` sees it."""
        return csrf_token(self.text(path, who))

    def post_form(
        self, path: str, who: str, data: dict[str, Any], *, form_page: str | None = None
    ) -> Any:
        """Post ``data`` to ``path`` as ``who``, with the token of ``form_page`` (or ``path``)."""
        token = self.csrf(form_page or path, who)
        return self.client.post(path, data={"csrf_token": token, **data}, headers=self.headers(who))


# --- spawners -------------------------------------------------------------------------


def local_spawner(
    groups: Any = (),
    *,
    name: str = "alice",
    admin: bool = False,
    server: str = "",
    home: Path | None = None,
    hub: Any = None,
) -> Any:
    """A real :class:`jupyterhub.spawner.SimpleLocalProcessSpawner` for a stand-in user.

    Parameters
    ----------
    groups
        The user's hub groups: names, or ``(name, properties)`` pairs (a course
        group carries its profile in ``properties["profile"]``).
    name, admin
        The user's name and whether they are a hub admin.
    server
        The named server ("" for the default one).
    home
        Folder whose ``<username>`` child is the user's home (``home_dir_template``);
        None: the spawner's default.
    hub
        The hub model ``get_env`` reads (``public_host``, ``api_url``, ``base_url``);
        None: the spawner's default (JupyterHub gives the real one at spawn).
    """
    from types import SimpleNamespace

    from jupyterhub.spawner import SimpleLocalProcessSpawner

    hub_groups = [
        SimpleNamespace(name=g, properties={})
        if isinstance(g, str)
        else SimpleNamespace(name=g[0], properties=dict(g[1]))
        for g in groups
    ]
    user = SimpleNamespace(name=name, admin=admin, groups=hub_groups, url=f"/user/{name}/")
    extra = {} if hub is None else {"hub": hub}
    spawner = SimpleLocalProcessSpawner(user=user, name=server, **extra)
    if home is not None:
        spawner.home_dir_template = str(home / "{username}")
    return spawner
