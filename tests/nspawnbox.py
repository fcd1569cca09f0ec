"""A booted Debian 12 container for the ``nspawn`` tests: its root file system, a preflight, a boot.

A minimal bookworm root file system (``debootstrap --variant=minbase``,
debootstrap(8)), cached in ``$COURSEHUB_NSPAWN_CACHE`` (default
``/var/tmp/coursehub-nspawn``), boots with ``systemd-nspawn --boot
--volatile=overlay`` (systemd-nspawn(1): the image stays as it was, every
write goes to a tmpfs, so each boot is a fresh machine), without a network of
its own; this checkout and its interpreter are bound read-only at the same
paths, so the container runs the code under test. Commands run inside through
``nsenter`` (the host has no systemd-machined).

What the machine cannot do is a skip with its reason: no root, no
``systemd-nspawn`` or ``debootstrap``, a ``debootstrap`` that fails (no
mirror), or a preflight container that cannot even run ``/bin/true`` (no
permission for namespaces). Once the preflight passed, a container that does
not boot is a failure, with its console's last lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("COURSEHUB_NSPAWN_CACHE", "/var/tmp/coursehub-nspawn"))
#: Debian packages of the container beside debootstrap's minimal set: systemd, the
#: interpreter and libraries the bound venv needs, node for the proxy, and PostgreSQL
#: for ``coursehub deploy --database postgresql``.
PACKAGES = (
    "systemd,systemd-sysv,dbus,python3,nodejs,openssl,passwd,acl,ca-certificates,libsqlite3-0,"
    "postgresql"
)
PROXY = REPO / ".venv/node/node_modules/.bin/configurable-http-proxy"
PYTHON = REPO / ".venv/bin/python"

#: The marks of every test that boots a container, and the skips of a machine without the tools.
MARKS = [
    pytest.mark.nspawn,
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (systemd-nspawn)"),
    pytest.mark.skipif(
        shutil.which("systemd-nspawn") is None or shutil.which("debootstrap") is None,
        reason="systemd-nspawn or debootstrap missing (apt-get install systemd-container "
        "debootstrap)",
    ),
    pytest.mark.skipif(not os.access(PROXY, os.X_OK), reason="no configurable-http-proxy"),
]


def root_fs() -> Path:
    """Return the cached bookworm root, made with debootstrap once (one to two minutes).

    Its folder's name carries a digest of :data:`PACKAGES`: another list makes another
    root. A lock on ``CACHE/.lock`` (flock(2)) makes parallel test workers wait for one
    debootstrap instead of running several.

    Raises
    ------
    pytest.skip.Exception
        If debootstrap fails (e.g. no Debian mirror reachable), with its last output.
    """
    root = CACHE / f"bookworm-{hashlib.sha256(PACKAGES.encode()).hexdigest()[:8]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "usr/lib/systemd/systemd").exists():
            return root
        partial = CACHE / f"bookworm.{uuid.uuid4().hex[:6]}"
        argv = ["debootstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm"]
        done = subprocess.run([*argv, str(partial)], capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            pytest.skip(f"debootstrap failed: {(done.stdout + done.stderr).strip()[-300:]}")
        partial.rename(root)
    return root


def _nspawn_argv(root: Path, machine: str) -> list[str]:
    """The options every container here gets (systemd-nspawn(1))."""
    return [
        "systemd-nspawn", "--quiet", "-D", str(root), "--volatile=overlay", "--register=no",
        "--private-network", "--keep-unit", f"--machine={machine}",
    ]  # fmt: skip


def preflight(root: Path) -> None:
    """Skip unless this machine can run a container at all: ``/bin/true`` in one, 60 s at most.

    ``--pipe`` runs the command without a boot or a terminal (systemd-nspawn(1)).

    Raises
    ------
    pytest.skip.Exception
        If ``systemd-nspawn --version`` or the tiny container fails, with its output
        (e.g. "Failed to create user namespace: Operation not permitted").
    """
    machine = f"coursehub-preflight-{uuid.uuid4().hex[:6]}"
    checks = (["systemd-nspawn", "--version"], [*_nspawn_argv(root, machine),
              "--pipe", "/bin/true"])  # fmt: skip
    for argv in checks:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.skip(f"systemd-nspawn cannot run here: {' '.join(argv)} took over 60 s")
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip()[-300:]
            pytest.skip(f"systemd-nspawn cannot run here: {' '.join(argv)}: {said}")


def _leader(nspawn_pid: int, deadline: float) -> int:
    """Return the pid of the container's PID 1, a child of systemd-nspawn.

    systemd-nspawn first forks an outer child that forks the container's PID 1 and
    exits; the outer child is a child of systemd-nspawn too, for a moment. So the
    leader is the child that is PID 1 of a PID namespace of its own: the last field
    of its ``NSpid`` line is 1 (proc(5), ``/proc/PID/status``).
    """
    while time.monotonic() < deadline:
        children = Path(f"/proc/{nspawn_pid}/task/{nspawn_pid}/children")
        for pid in children.read_text().split() if children.exists() else []:
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                nspid = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
                if len(nspid) > 1 and nspid[-1] == "1":
                    return int(pid)
        time.sleep(0.2)
    raise AssertionError("systemd-nspawn started no container")


class Container:
    """A booted container: :meth:`sh` runs a shell command in it as its root."""

    def __init__(self, leader: int) -> None:
        self.leader = leader

    def sh(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with ``sh -c`` in every namespace of the container."""
        argv = ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "--"]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
        return subprocess.run(
            [*argv, "/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )

    def path(self, inside: str) -> Path:
        """The host's path of the container's file ``inside`` (proc(5), ``/proc/PID/root``)."""
        return Path(f"/proc/{self.leader}/root") / inside.lstrip("/")

    def booted(self, deadline: float) -> str:
        """Wait until the container's systemd has finished booting (its bus answers first).

        Returns
        -------
        str
            ``""`` once booted (``running`` or ``degraded``), else what the last
            ``systemctl is-system-running --wait`` said, for the failure message.
        """
        said = "nothing yet"
        while time.monotonic() < deadline:
            done = self.sh("systemctl is-system-running --wait", timeout=90)
            if done.stdout.strip() in ("running", "degraded"):
                return ""
            said = f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-300:]}"
            time.sleep(0.5)
        return said


#: Options of a container whose systemd can filter a unit's IP traffic (``IPAddressDeny=``):
#: the unified cgroup hierarchy (systemd-nspawn(1), ``$SYSTEMD_NSPAWN_UNIFIED_HIERARCHY``; on a
#: host with the hybrid hierarchy it has no controllers) and the ``bpf()`` system call with the
#: capabilities systemd loads its cgroup programs with (``--system-call-filter``, ``--capability``).
IP_FILTER = {
    "env": {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"},
    "options": ("--system-call-filter=bpf", "--capability=CAP_BPF,CAP_NET_ADMIN,CAP_SYS_ADMIN"),
}


@contextlib.contextmanager
def boot(
    log: Path, options: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> Iterator[Container]:
    """Boot a fresh container (about 10 s), its console in ``log``; power it off after.

    ``options``: more systemd-nspawn options; ``env``: more variables of its
    environment (e.g. :data:`IP_FILTER`'s).

    Raises
    ------
    pytest.skip.Exception
        If the machine cannot run a container (:func:`root_fs`, :func:`preflight`).
    AssertionError
        If it passed the preflight but did not finish booting in 90 s.
    """
    root = root_fs()
    preflight(root)
    argv = [*_nspawn_argv(root, f"coursehub-{uuid.uuid4().hex[:6]}"), "--boot", *options,
            f"--bind-ro={REPO}", f"--bind-ro={Path(sys.base_prefix).resolve()}"]  # fmt: skip
    with open(log, "w") as console:
        nspawn = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=console,
                                  env={**os.environ, **(env or {})})  # fmt: skip
    try:
        box = Container(_leader(nspawn.pid, time.monotonic() + 30))
        said = box.booted(time.monotonic() + 90)
        assert not said, f"not booted in 90 s: {said}\n{log.read_text()[-2000:]}"
        yield box
    finally:
        nspawn.terminate()  # an orderly power-off of the container
        try:
            nspawn.wait(timeout=60)
        except subprocess.TimeoutExpired:
            nspawn.kill()
            nspawn.wait()


#: Deploy as an administrator would, with the checkout's proxy and a trial certificate.
DEPLOY = f"cd / && {PYTHON} -m coursehub deploy --proxy {PROXY} --hostname hub.test"
#: The install's settings, as its units read them (EnvironmentFile=).
SETTINGS = "set -a; . /etc/coursehub/coursehub.env; . /etc/coursehub/secrets.env; set +a; "
#: Start the install's units, as docs/deploy.md says.
START_UNITS = (
    "systemd-tmpfiles --create /etc/tmpfiles.d/coursehub.conf && systemctl daemon-reload && "
    "systemctl enable --now coursehub-hub coursehub-web"
)


def name_host(box: Container) -> None:
    """Name the host in ``/etc/hosts``, as Debian's installer does; debootstrap leaves it out.

    JupyterHub reaches its proxy by that name (``bind_url "https://:443"``).
    """
    box.sh('echo "127.0.1.1 $(hostname)" >> /etc/hosts')


def script(box: Container, text: str, *args: str, timeout: float = 150):
    """Run the Python ``text`` in the container with this checkout's interpreter."""
    inside = f"/tmp/s-{uuid.uuid4().hex[:6]}.py"
    box.path(inside).write_text(text)
    return box.sh(f"cd / && {PYTHON} {inside} {' '.join(args)}", timeout=timeout)
