"""git in a subprocess: an allow-listed environment, a timeout, failures explained in one line.

git runs with only the variables of :func:`plan_git_env`: no user or
system configuration (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``,
a private empty ``HOME``: no ``credential.helper`` may store a token), no
prompt (``GIT_TERMINAL_PROMPT=0``), only the transports a course repository
may use (``GIT_ALLOW_PROTOCOL``: never ``ext::`` or ``file``), messages in
English (``LC_ALL=C``) so that :func:`explain_git_error` can read them. The
proxy and CA variables of the service's own environment pass through.
Variables: ``git help git`` (ENVIRONMENT VARIABLES) and ``git help config``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from coursehub.errors import CoursehubError

#: Variables of the service's environment handed to git as they are (proxies, CAs).
PASSED_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
)
#: Transports git may use to fetch a course's repository.
REMOTE_PROTOCOLS = "https:http:ssh"
#: Seconds a fetch of the teacher's repository may take.
FETCH_TIMEOUT_S = 900.0
#: Seconds a local git step may take.
LOCAL_TIMEOUT_S = 300.0


class GitCommandError(CoursehubError):
    """A git command that failed; ``stderr`` is its output (already redacted)."""

    def __init__(self, args: Sequence[str], stderr: str, returncode: int) -> None:
        self.stderr = stderr
        self.returncode = returncode
        super().__init__(f"git {' '.join(args[:2])} failed: {stderr.strip()[-300:]}")


def plan_git_env(
    home: Path,
    extra: Mapping[str, str] | None = None,
    protocols: str = REMOTE_PROTOCOLS,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return the whole environment of a git subprocess (pure but for ``os.environ``'s proxies).

    Parameters
    ----------
    home
        git's ``HOME``: a private, empty folder.
    extra
        Credential variables (:func:`coursehub.material.credential.plan_credential_env`).
    protocols
        ``GIT_ALLOW_PROTOCOL``: ``"https:http:ssh"`` to fetch, ``"file"`` to publish locally.
    environ
        Where the :data:`PASSED_VARIABLES` are read (default ``os.environ``).
    """
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in PASSED_VARIABLES if source.get(name)}
    env.update(
        PATH="/usr/local/bin:/usr/bin:/bin",
        HOME=str(home),
        LC_ALL="C",
        LANG="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ALLOW_PROTOCOL=protocols,
        GIT_AUTHOR_NAME="coursehub",
        GIT_AUTHOR_EMAIL="coursehub@localhost",
        GIT_COMMITTER_NAME="coursehub",
        GIT_COMMITTER_EMAIL="coursehub@localhost",
    )
    env.update(extra or {})
    return env


def plan_local_git_env(home: Path) -> dict[str, str]:
    """Return git's environment for work on the host's own mirrors (``file`` protocol only).

    :func:`plan_git_env` with ``home`` and no credential.
    """
    return plan_git_env(home, protocols="file")


def run_git(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    timeout: float = LOCAL_TIMEOUT_S,
    secrets: Sequence[str] = (),
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` with exactly ``env``, no standard input, output captured.

    ``secrets``: strings replaced by ``***`` in the output kept (a token git
    might echo in an error).

    Raises
    ------
    GitCommandError
        If git exits non-zero (with ``check``), runs past ``timeout`` seconds,
        is not installed on ``env``'s ``PATH``, or ``cwd`` does not exist.
    """
    if cwd is not None and not Path(cwd).is_dir():
        raise GitCommandError(args, f"folder {cwd} does not exist", -1)
    try:
        done = subprocess.run(
            ["git", *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitCommandError(args, f"timed out after {timeout:g} s", -1) from None
    except FileNotFoundError:
        where = env.get("PATH", os.defpath)
        raise GitCommandError(
            args, f"git is not installed (Debian package git) or not on PATH ({where})", 127
        ) from None
    stderr = redact(done.stderr, secrets)
    if check and done.returncode != 0:
        raise GitCommandError(args, stderr, done.returncode)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, stderr)


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every non-empty string of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


#: The one explanation of every failure to reach a repository: unknown host, refused or
#: timed-out connection, no repository, a server error, an ssh banner, a message git has no
#: entry for. Telling them apart would tell a teacher which internal service answers where.
UNREADABLE = (
    "{url} could not be fetched (no answer, no git repository there, or a private one: it "
    "needs a credential that can see it): check the URL; git's message is in the course "
    "app's log"
)
#: git's words when the server asked for a user name and token: without a stored credential,
#: any web server asking for a password says so (:data:`UNREADABLE` then, not a hint).
ASKED_FOR_CREDENTIAL = ("terminal prompts disabled", "could not read username")
#: (substring of git's or ssh's message, explanation); the first match wins; else UNREADABLE.
#: Only messages of a git server that answered as one about the course's own settings.
GIT_MESSAGES: tuple[tuple[str, str], ...] = (
    ("couldn't find remote ref", "branch {branch} does not exist in {url}"),
    ("terminal prompts disabled", "{url} asks for a user name and token: {credential}"),
    ("could not read username", "{url} asks for a user name and token: {credential}"),
    ("authentication failed", "{url} refused the credential: {credential}"),
    ("permission denied (publickey", "{url} refused the deploy key: {credential}"),
    ("host key verification failed", "the SSH host key of {url} changed: ask an admin"),
    ("transport '", "{url}: this transport is not allowed"),
)


def explain_git_error(
    stderr: str, url: str, branch: str, credential: str, has_branches: bool = True
) -> str:
    """One line that says what went wrong fetching ``branch`` of ``url`` (pure).

    ``credential`` is the kind stored for the course ("" for none); the
    message says whether to add, check or renew it. Any failure to reach a
    repository is :data:`UNREADABLE`, never git's own words (the caller logs
    those for the host's admin). ``has_branches``: the repository lists
    branches (``git ls-remote --heads``); without any, a missing branch is
    :data:`UNREADABLE` too (any web server answering 200 looks like an empty
    repository to git).
    """
    if credential:
        advice = f"check or renew the course's {credential} (coursehub material set --credential)"
    else:
        advice = "a private repository needs a credential (coursehub material set --credential)"
    low = stderr.lower()
    if "couldn't find remote ref" in low and not has_branches:
        return UNREADABLE.format(url=url)
    if not credential and any(needle in low for needle in ASKED_FOR_CREDENTIAL):
        return UNREADABLE.format(url=url)
    for needle, message in GIT_MESSAGES:
        if needle in low:
            return message.format(url=url, branch=branch, credential=advice)
    return UNREADABLE.format(url=url)


def rev_parse(repo: Path, name: str, env: dict[str, str], missing_ok: bool = False) -> str:
    """Return the object id ``name`` names in ``repo`` (``git rev-parse --verify``).

    With ``missing_ok``, "" when ``name`` names nothing.

    Raises
    ------
    GitCommandError
        If ``name`` names nothing (without ``missing_ok``) or git fails.
    """
    done = run_git(["rev-parse", "--verify", "--quiet", name], env, cwd=repo, check=not missing_ok)
    return done.stdout.strip() if done.returncode == 0 else ""
