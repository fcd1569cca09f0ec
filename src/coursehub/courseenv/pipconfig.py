"""The site's pip settings as a build sees them: read as root, handed to the sandbox as ``PIP_*``.

A setting that would install elsewhere or read another file is dropped; one
holding a credential fails the build (the sandbox gets none); the network is
kept only when an index or link is remote.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Mapping

from coursehub.courseenv.errors import EnvBuildError
from coursehub.errors import CoursehubError
from coursehub.sandbox.env import is_secret_name, plan_sandbox_env

#: Variables removed from the build's environment (they would redirect the new Python).
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PIP_USER")
#: pip settings never passed to the build: they would install elsewhere than the build,
#: read other configuration files, or share a cache the sandbox account could write.
DROPPED_PIP_SETTINGS = frozenset(
    {"user", "target", "prefix", "root", "src", "config-file", "cache-dir", "isolated"}
)
#: pip settings naming a secret, whatever their name says (a client key file).
CREDENTIAL_PIP_SETTINGS = frozenset({"client-cert"})
#: A URL holding a user name or password (``scheme://user:password@host``).
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s]+@", re.IGNORECASE)
#: pip's default index, used unless ``index-url`` or ``no-index`` says otherwise.
DEFAULT_INDEX_URL = "https://pypi.org/simple"
#: Sections of ``pip config list`` that apply to ``pip install``, weakest first.
PIP_SECTIONS = ("global", "install", ":env:")


def parse_pip_config(text: str) -> dict[str, str]:
    """Return the settings of ``pip config list`` output that apply to ``pip install`` (pure).

    Lines are ``section.key='value'``; of the sections :data:`PIP_SECTIONS`, a
    later one wins (``PIP_*`` variables over ``install`` over ``global``, as
    pip itself reads them). Other sections and malformed lines are skipped.
    """
    ranked: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.partition(".")
        if not sep or not dot or section not in PIP_SECTIONS or not key:
            continue
        try:
            value = ast.literal_eval(raw) if raw[:1] in ("'", '"') else raw
        except (ValueError, SyntaxError):
            continue
        rank = PIP_SECTIONS.index(section)
        if key not in ranked or ranked[key][0] <= rank:
            ranked[key] = (rank, str(value))
    return {key: value for key, (_rank, value) in ranked.items()}


def read_pip_config(python: str) -> dict[str, str]:
    """Return the site's pip settings as root's pip sees them (:func:`parse_pip_config`).

    Runs ``python -m pip config list``: the trusted interpreter the build
    starts from, never the new one. Root's own ``~/.config/pip/pip.conf``
    counts, although the sandbox account cannot read it: the settings reach
    the build as ``PIP_*`` variables (:func:`plan_pip_env`).

    Raises
    ------
    EnvBuildError
        If pip cannot list its configuration.
    """
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    done = subprocess.run(
        [python, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvBuildError(f"cannot read the site's pip configuration: {last}")
    return parse_pip_config(done.stdout)


def _is_true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")


def pip_locations(config: Mapping[str, str]) -> list[str]:
    """Return every index and find-links location pip would read with ``config`` (pure)."""
    locations = config.get("find-links", "").split()
    if not _is_true(config.get("no-index", "0")):
        locations += config.get("index-url", DEFAULT_INDEX_URL).split()
        locations += config.get("extra-index-url", "").split()
    return locations


def _is_local(location: str) -> bool:
    return location.startswith("file:") or "://" not in location


def plan_needs_network(config: Mapping[str, str]) -> bool:
    """Return True if pip, set up by ``config``, reads an index or link that is not local (pure).

    Local: a path or a ``file:`` URL. Without ``index-url`` (and without
    ``no-index``) pip reads :data:`DEFAULT_INDEX_URL`.
    """
    return not all(_is_local(location) for location in pip_locations(config))


def local_pip_folders(config: Mapping[str, str]) -> list[str]:
    """Return the local folders of :func:`pip_locations` (the build must read them) (pure)."""
    folders = []
    for location in pip_locations(config):
        if _is_local(location):
            path = location.removeprefix("file://").removeprefix("file:")
            if path.startswith("/"):
                folders.append(path)
    return sorted(set(folders))


def plan_pip_env(
    environ: Mapping[str, str], config: Mapping[str, str], home: str
) -> dict[str, str]:
    """Return the environment of the build's sandboxed venv and pip (pure).

    The sandbox's allow-list (:func:`coursehub.sandbox.env.plan_sandbox_env`)
    of ``environ`` without :data:`DROPPED_ENV`, ``HOME`` and ``TMPDIR`` in the
    job's own ``home``, and each setting of ``config`` as its ``PIP_*``
    variable (less :data:`DROPPED_PIP_SETTINGS`), with ``PIP_CONFIG_FILE``
    set to ``os.devnull`` so that pip reads no file besides.

    Raises
    ------
    CoursehubError
        If a setting holds a credential (a URL with a user name or password,
        a client key, a name such as ``password``): the sandbox gets none.
    """
    env = {k: v for k, v in plan_sandbox_env(environ).items() if k not in DROPPED_ENV}
    for key in sorted(config):
        value = config[key]
        if key in CREDENTIAL_PIP_SETTINGS or is_secret_name(key) or _URL_USERINFO.search(value):
            raise CoursehubError(
                f"the site's pip setting {key} holds a credential, and the build's sandbox "
                "gets none: use an index that needs no credential (e.g. a local mirror)"
            )
        if key not in DROPPED_PIP_SETTINGS:
            env["PIP_" + key.upper().replace("-", "_")] = value
    env.update({"PIP_CONFIG_FILE": os.devnull, "HOME": home, "TMPDIR": f"{home}/tmp"})
    return env
