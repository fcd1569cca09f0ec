"""Where a course's material lives on the course app's host.

::

    MATERIAL_DIR/                 0755  (COURSEHUB_MATERIAL_DIR)
      published/                  0755  what students read
        <course_id>.git           bare: the course's groups read (POSIX ACL), others nothing;
                                  everyone reads until the groups exist (material.access)
        gitconfig                 0644  the safe.directory list every student's git reads
      private/                    0700  the coursehub service user alone
        credentials/<course_id>   0600  token or deploy key
        credential-hosts/<course_id>  the scheme://host:port it was given for (sent nowhere else)
        upstream/<course_id>.git  bare mirror of the teacher's repository (all its history)
        locks/<course_id>.lock    one update of a course at a time (flock)
        home/                     git's HOME: no user configuration, no stored credential
        askpass                   0700  GIT_ASKPASS program reading the credential file
        known_hosts               SSH host keys, first seen (StrictHostKeyChecking=accept-new)

Students pull ``file://MATERIAL_DIR/published/<course_id>.git``: servers of
the local, systemd and Slurm spawners share the host's (or cluster's)
filesystem, so no daemon, port or credential is needed, and file modes make
it read-only, for the course's team and students only
(:mod:`coursehub.material.access`). The published repository holds only the
course's folder, as commits made by coursehub: nothing of the teacher's other folders or history.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from coursehub.atomicfile import write_atomically
from coursehub.filemodes import ensure_private_dir
from coursehub.settings import check_course_id, data_dir

#: Mode of the published folders: everyone may read and traverse, only coursehub writes.
PUBLISHED_MODE = 0o755

#: GIT_ASKPASS program: git runs it with a prompt ("Username for 'https://host': " /
#: "Password for 'https://user@host': ", ``git help credentials``, "Requesting credentials");
#: it prints the user name or the token of the file named by COURSEHUB_GIT_CREDENTIAL (a path,
#: never the secret itself), and only when the prompt's scheme, host and port are
#: COURSEHUB_GIT_CREDENTIAL_HOST's (a redirect or another host gets nothing: exit 1).
ASKPASS_TEMPLATE = """#!{python} -I
import os, sys
from urllib.parse import urlsplit
prompt = sys.argv[1] if len(sys.argv) > 1 else ""
ports = {{"https": 443, "http": 80}}
def origin(url):
    parts = urlsplit(url)
    try:
        port = parts.port or ports.get(parts.scheme.lower())
    except ValueError:
        return None
    if not parts.hostname or not port:
        return None
    return (parts.scheme.lower(), parts.hostname.lower().rstrip("."), port)
start, end = prompt.find("'"), prompt.rfind("'")
asked = origin(prompt[start + 1:end]) if 0 <= start < end else None
if asked is None or asked != origin(os.environ.get("COURSEHUB_GIT_CREDENTIAL_HOST", "")):
    sys.exit(1)
with open(os.environ["COURSEHUB_GIT_CREDENTIAL"], encoding="ascii") as f:
    user, _, token = f.read().strip().rpartition(":")
print((user or "{user}") if prompt.lower().startswith("username") else token)
"""
#: User name sent with a bare token; GitLab accepts any for access tokens, GitHub too for PATs.
DEFAULT_TOKEN_USER = "oauth2"


def material_root(environ: Mapping[str, str] | None = None) -> Path:
    """``COURSEHUB_MATERIAL_DIR``, else ``material`` in coursehub's data directory.

    Students must be able to traverse every folder above ``published``: set
    ``COURSEHUB_MATERIAL_DIR`` (e.g. ``/srv/coursehub/material``) when the
    data directory is in a private home.
    """
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_MATERIAL_DIR"):
        return Path(env["COURSEHUB_MATERIAL_DIR"]).expanduser()
    return data_dir(env) / "material"


@dataclass(frozen=True)
class MaterialLayout:
    """The folders and files of the material of every course, below ``root``."""

    root: Path

    @property
    def published(self) -> Path:
        return self.root / "published"

    @property
    def gitconfig(self) -> Path:
        """git configuration of students' servers (``GIT_CONFIG_SYSTEM``): the safe directories."""
        return self.published / "gitconfig"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def home(self) -> Path:
        return self.private / "home"

    @property
    def askpass(self) -> Path:
        return self.private / "askpass"

    @property
    def known_hosts(self) -> Path:
        return self.private / "known_hosts"

    def credential(self, course_id: str) -> Path:
        """The credential file of a course (it may not exist)."""
        return self.private / "credentials" / check_course_id(course_id)

    def credential_host(self, course_id: str) -> Path:
        """The ``scheme://host:port`` the course's credential was given for (may not exist)."""
        return self.private / "credential-hosts" / check_course_id(course_id)

    def upstream(self, course_id: str) -> Path:
        """The private bare mirror of the teacher's repository."""
        return self.private / "upstream" / f"{check_course_id(course_id)}.git"

    def lock(self, course_id: str) -> Path:
        return self.private / "locks" / f"{check_course_id(course_id)}.lock"

    def published_repo(self, course_id: str) -> Path:
        """The repository students pull from."""
        return self.published / f"{check_course_id(course_id)}.git"

    def pull_url(self, course_id: str) -> str:
        """``file://`` URL of :meth:`published_repo` (what nbgitpuller clones)."""
        return "file://" + quote(str(self.published_repo(course_id).resolve()))

    def ensure(self) -> MaterialLayout:
        """Create the folders with their modes (correcting old ones) and the askpass program.

        Raises
        ------
        coursehub.errors.CoursehubError
            If a private folder is a symbolic link or cannot be made private.
        """
        if not self.root.exists():
            self.root.mkdir(mode=PUBLISHED_MODE, parents=True)
        self.published.mkdir(mode=PUBLISHED_MODE, exist_ok=True)
        os.chmod(self.published, PUBLISHED_MODE)
        ensure_private_dir(self.private)
        for sub in ("credentials", "credential-hosts", "upstream", "locks", "home"):
            ensure_private_dir(self.private / sub)
        script = ASKPASS_TEMPLATE.format(python=sys.executable, user=DEFAULT_TOKEN_USER)
        if not self.askpass.exists() or self.askpass.read_text(encoding="utf-8") != script:
            write_atomically(self.askpass, script, mode=0o700)
        return self


def render_gitconfig(repositories: list[Path]) -> str:
    """The students' ``gitconfig``: ``/etc/gitconfig`` included, each repository a
    ``safe.directory`` (``git help config``, ``include.path`` and ``safe.directory``)."""
    lines = ["[include]", "\tpath = /etc/gitconfig", "[safe]"]
    lines += [f"\tdirectory = {path}" for path in sorted(repositories)]
    return "\n".join(lines) + "\n"


def plan_unreachable(path: Path) -> list[Path]:
    """The folders above ``path`` (and itself) that other users cannot traverse (no ``o+x``).

    Students pull ``file://`` URLs as themselves: each of these folders stops them.
    """
    blocked = []
    for folder in [path, *path.parents]:
        try:
            if not folder.stat().st_mode & 0o001:
                blocked.append(folder)
        except FileNotFoundError:
            continue
    return blocked
