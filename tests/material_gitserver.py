"""A private git repository over HTTP for the material tests: git http-backend, basic auth.

git's own smart-HTTP server program (``git help http-backend``) run as a CGI
per request by a small WSGI app (wsgiref, one thread), accepting one user
name and token. It serves the bare repositories of ``root``; the tests push
to them directly through the filesystem (a teacher's push, a force-push).

The server listens on 127.0.0.1, which the course app refuses by default
(``COURSEHUB_MATERIAL_HOSTS``, :mod:`coursehub.material.hosts`): the tests'
fixtures allow it with :func:`allow_loopback`, as a site with a git server
on the same machine would. :func:`serve_recorder` is another host (another
port): it answers every request with one status and records what it got,
``Authorization`` included.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from coursehub.material.hosts import HOSTS_VARIABLE

#: What the tests' sites allow: the loopback address of the tests' git servers.
LOOPBACK_HOSTS = "127.0.0.1"


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def git_app(root: Path, user: str, token: str) -> Any:
    expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ.get("HTTP_AUTHORIZATION") != expected:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required\n"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": str(root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "GATEWAY_INTERFACE": "CGI/1.1",
        }
        for key in ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE"):
            env[key] = environ.get(key, "")
        env["CONTENT_LENGTH"] = str(len(body))
        for key in ("HTTP_GIT_PROTOCOL", "HTTP_CONTENT_ENCODING"):
            if environ.get(key):
                env[key] = environ[key]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, payload = out.stdout.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]

    return app


@contextmanager
def serve_git(root: Path, user: str, token: str) -> Iterator[str]:
    """Serve ``root``'s repositories at ``http://127.0.0.1:PORT/`` until the block ends."""
    server: WSGIServer = make_server(
        "127.0.0.1", 0, git_app(root, user, token), handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def allow_loopback(value: str = LOOPBACK_HOSTS) -> Iterator[None]:
    """Set ``COURSEHUB_MATERIAL_HOSTS`` to ``value`` until the block ends (then as it was)."""
    before = os.environ.get(HOSTS_VARIABLE)
    os.environ[HOSTS_VARIABLE] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(HOSTS_VARIABLE, None)
        else:
            os.environ[HOSTS_VARIABLE] = before


@contextmanager
def serve_recorder(
    status: str = "401 Unauthorized",
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Answer every request with ``status``/``headers``/``body`` at ``http://127.0.0.1:PORT``;
    yield that base URL and the requests seen (``path``, ``authorization``)."""
    seen: list[dict[str, str]] = []
    answer = headers if headers is not None else [("WWW-Authenticate", 'Basic realm="x"')]

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(
            {
                "path": environ.get("PATH_INFO", ""),
                "authorization": environ.get("HTTP_AUTHORIZATION", ""),
            }
        )
        start_response(status, answer)
        return [body]

    server: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git as the teacher would (fixed identity), return its output."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd or "/"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "teacher",
        "GIT_AUTHOR_EMAIL": "teacher@example.org",
        "GIT_COMMITTER_NAME": "teacher",
        "GIT_COMMITTER_EMAIL": "teacher@example.org",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def teacher_repo(root: Path, name: str, files: dict[str, str], branch: str = "main") -> Path:
    """Make ``root/name.git`` whose ``branch`` holds ``files``; return its work tree."""
    bare = root / f"{name}.git"
    git("init", "--bare", "--quiet", "-b", branch, str(bare))
    work = root / f"{name}-work"
    git("init", "--quiet", "-b", branch, str(work))
    commit_files(work, files, "first version")
    git("remote", "add", "origin", str(bare), cwd=work)
    git("push", "--quiet", "origin", branch, cwd=work)
    return work


def commit_files(work: Path, files: dict[str, str], message: str) -> str:
    """Write ``files`` in ``work``, commit them; return the commit."""
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git("add", "--all", cwd=work)
    git("commit", "--quiet", "-m", message, cwd=work)
    return git("rev-parse", "HEAD", cwd=work)
