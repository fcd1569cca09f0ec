"""A private repository's credential: a token (HTTPS) or a deploy key (SSH), a private file.

The teacher (or an admin) gives a file; coursehub checks it
(:func:`parse_credential`, :func:`check_credential_fits`) and copies it to
``private/credentials/<course_id>`` (0600, in a 0700 folder of the
coursehub service user, :mod:`coursehub.material.layout`). The catalog
records only its kind. git gets it through a program or an SSH option that
names the file (:func:`plan_credential_env`), never through a URL, an
argument or a log line.

A credential follows its host: the scheme, host and port it was given for
are stored beside it (``private/credential-hosts/<course_id>``). A new URL
on another host must come with the credential again, or drop it
(:func:`check_credential_change`, the one check every way of setting a
repository goes through); at fetch time a URL on another host gets no
credential, and the askpass program answers only a prompt for that host.

Token file: one line, ``TOKEN`` or ``USER:TOKEN`` (GitLab deploy tokens need
their user name; a GitLab access token or a GitHub token works with any).
Deploy key: an OpenSSH or PEM private key without passphrase (git runs ssh
with ``BatchMode=yes``: nobody could type one).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.material.hosts import Origin, parse_origin, repo_origin
from coursehub.material.layout import MaterialLayout

TOKEN, DEPLOY_KEY = "token", "deploy-key"
#: Largest credential file read (an RSA-4096 OpenSSH key is about 3.4 kB).
MAX_CREDENTIAL_BYTES = 16384
_TOKEN = re.compile(r"^(?:[A-Za-z0-9._@+-]{1,200}:)?[\x21-\x7e]{8,1000}$")
_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.+-----END [A-Z ]*PRIVATE KEY-----", re.S)
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Credential:
    """A checked credential: its ``kind`` (:data:`TOKEN`, :data:`DEPLOY_KEY`) and ``text``."""

    kind: str
    text: str

    def __repr__(self) -> str:  # never show the secret, even in a traceback or a debugger
        return f"Credential(kind={self.kind!r})"


def parse_credential(data: bytes, where: str) -> Credential:
    """Return the credential in ``data`` (a file's content); ``where`` names it in errors.

    Raises
    ------
    UsageError
        Empty, larger than :data:`MAX_CREDENTIAL_BYTES`, not ASCII, an
        encrypted key, or neither a private key nor one line ``[USER:]TOKEN``
        of 8 to 1000 printable characters.
    """
    if len(data) > MAX_CREDENTIAL_BYTES:
        raise UsageError(f"credential file {where} is larger than {MAX_CREDENTIAL_BYTES} bytes")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise UsageError(f"credential file {where} is not ASCII text") from None
    if not text:
        raise UsageError(f"credential file {where} is empty")
    if "PRIVATE KEY-----" in text:
        if not _KEY.search(text):
            raise UsageError(f"credential file {where} holds a truncated private key")
        if "ENCRYPTED" in text:
            raise UsageError(
                f"the deploy key in {where} has a passphrase: give a key without one "
                "(ssh-keygen -t ed25519 -N '' -f deploy_key)"
            )
        return Credential(DEPLOY_KEY, text.replace("\r\n", "\n") + "\n")
    if "\n" in text or not _TOKEN.match(text):
        raise UsageError(
            f"credential file {where} is neither a private key nor one line TOKEN or "
            "USER:TOKEN (8 to 1000 printable characters, no spaces)"
        )
    return Credential(TOKEN, text + "\n")


def check_credential_fits(kind: str, url: str) -> None:
    """Refuse a credential the repository URL cannot use, or would send in clear.

    Raises
    ------
    UsageError
        A token with an SSH URL, a deploy key with an HTTP(S) URL, or a token
        over plain ``http://`` to another host than this one.
    """
    if not kind:
        return
    parts = urlsplit(url) if "://" in url else None
    is_http = parts is not None and parts.scheme.lower() in ("http", "https")
    if kind == TOKEN and not is_http:
        raise UsageError(f"a token works with an https:// URL, not {url!r}: use a deploy key")
    if kind == DEPLOY_KEY and is_http:
        raise UsageError(
            f"a deploy key works with an SSH URL (git@host:group/repo.git), not {url!r}"
        )
    plain = parts is not None and parts.scheme.lower() == "http"
    if kind == TOKEN and plain and parts is not None and parts.hostname not in _LOOPBACK:
        raise UsageError(f"{url!r} is plain http: the token would travel in clear; use https")


def check_credential_change(
    url: str,
    given: str,
    drop: bool,
    stored: str,
    stored_for: Origin | None,
) -> str:
    """Return the credential kind a course has once its repository is ``url`` (pure).

    The one check of every way of setting a repository (API, pages, CLI;
    :func:`coursehub.material.service.set_course_material`).

    Parameters
    ----------
    url
        The new repository URL (checked).
    given
        The kind of a credential given with it ("" for none).
    drop
        Forget the stored credential.
    stored
        The kind of the course's stored credential ("" for none).
    stored_for
        Where the stored credential was given for (its stored host, else the
        origin of the course's URL of that time; None: unknown).

    Raises
    ------
    UsageError
        A stored credential kept for a URL on another scheme, host or port
        (it must be given again, or dropped), or a credential that does not
        fit ``url`` (:func:`check_credential_fits`).
    """
    if given:
        kind = given
    elif drop:
        kind = ""
    else:
        kind = stored
        origin = repo_origin(url)
        if kind and origin != stored_for:
            where = str(stored_for) if stored_for else "another host"
            raise UsageError(
                f"the course's {kind} was given for {where}, not {origin}: give the credential "
                "again for the new repository (credential, --credential FILE) or drop it "
                "(drop_credential, --no-credential)"
            )
    check_credential_fits(kind, url)
    return kind


def read_credential_file(path: Path) -> Credential:
    """Read and check the credential file ``path`` (:func:`parse_credential`).

    Raises
    ------
    UsageError
        If it cannot be read, or :func:`parse_credential` refuses it.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CREDENTIAL_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read credential file {path}: {exc.strerror}") from None
    return parse_credential(data, str(path))


def store_credential(
    layout: MaterialLayout, course_id: str, credential: Credential | None, url: str = ""
) -> None:
    """Write (0600, atomically) or, for None, remove the course's credential file.

    ``url``: the repository it is given for; its scheme, host and port are
    written beside it (:meth:`~coursehub.material.layout.MaterialLayout.credential_host`),
    the only place git may send it to. Without ``url`` (a file of an older
    version) the credential goes to the host of the course's URL.
    """
    path, host = layout.credential(course_id), layout.credential_host(course_id)
    if credential is None:
        path.unlink(missing_ok=True)
        host.unlink(missing_ok=True)
        return
    if url:
        write_atomically(host, f"{repo_origin(url)}\n", mode=0o600)
    else:
        host.unlink(missing_ok=True)
    write_atomically(path, credential.text, mode=0o600)


def stored_host(layout: MaterialLayout, course_id: str) -> Origin | None:
    """The scheme, host and port the course's credential was given for; None if not recorded."""
    try:
        text = layout.credential_host(course_id).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None
    return parse_origin(text)


def stored_kind(layout: MaterialLayout, course_id: str) -> str:
    """The kind of the course's stored credential, "" when it has none.

    Raises
    ------
    UsageError
        If the stored file is unreadable or no longer a valid credential.
    """
    path = layout.credential(course_id)
    if not path.exists():
        return ""
    return read_credential_file(path).kind


def plan_credential_env(
    layout: MaterialLayout,
    course_id: str,
    kind: str,
    host: Origin | None = None,
    ssh_address: str = "",
) -> dict[str, str]:
    """Environment variables that give git the course's credential by its file's path.

    A token: ``GIT_ASKPASS`` (the layout's askpass program),
    ``COURSEHUB_GIT_CREDENTIAL`` (the file) and ``COURSEHUB_GIT_CREDENTIAL_HOST``
    (``host``: the askpass program answers no prompt for another host). A deploy
    key, or no credential: ``GIT_SSH_COMMAND`` with ``BatchMode=yes`` (never a prompt), no SSH
    configuration file, no agent, the layout's ``known_hosts`` and, for a
    key, ``-i FILE`` with ``IdentitiesOnly=yes``; with ``ssh_address``, ssh
    connects to that checked address (``HostName``), keeping the host's name
    for its key (``HostKeyAlias``). See ``git help git`` (``GIT_ASKPASS``,
    ``GIT_SSH_COMMAND``) and ssh_config(5).
    """
    ssh = [
        "ssh",
        "-F",
        "/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={layout.known_hosts}",
        "-o",
        "IdentityAgent=none",
    ]
    if ssh_address and host is not None:
        ssh += ["-o", f"HostName={ssh_address}", "-o", f"HostKeyAlias={host.host}"]
    env: dict[str, str] = {}
    if kind == TOKEN:
        env["GIT_ASKPASS"] = str(layout.askpass)
        env["COURSEHUB_GIT_CREDENTIAL"] = str(layout.credential(course_id))
        env["COURSEHUB_GIT_CREDENTIAL_HOST"] = str(host) if host is not None else ""
    elif kind == DEPLOY_KEY:
        ssh += ["-o", "IdentitiesOnly=yes", "-i", str(layout.credential(course_id))]
    env["GIT_SSH_COMMAND"] = shlex.join(ssh)
    return env
