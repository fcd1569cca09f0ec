"""A systemd server's stop notice, read from a real unit that was killed, in a booted Debian 12.

:class:`coursehub.spawn.systemdserver.CoursehubSystemdSpawner` says why a
server stopped from its transient unit's ``Result`` and ``ExecMainStatus``
(``systemctl show``, :class:`coursehub.spawn.serverexit.SystemdStopNoticeMixin`).
Here the container of tests/nspawnbox.py (the fixture of test_deploy_nspawn.py)
runs a unit as SystemdSpawner starts one (``systemd-run --unit``, with
``MemoryMax``), its main process is killed, and that spawner class, built
inside the container, reads the unit through the same ``describe_exit``.
"""

from __future__ import annotations

import json
import uuid

import pytest

from nspawnbox import MARKS, REPO, Container
from test_deploy_nspawn import container  # noqa: F401  (a fixture)

pytestmark = MARKS

#: Runs in the container: the spawner class reads the unit ``argv[1]`` with
#: ``mem_limit`` ``argv[2]`` bytes and prints the notice and what systemd said.
READ_NOTICE = """
import asyncio, json, subprocess, sys
from types import SimpleNamespace
from coursehub.spawn.systemdserver import CoursehubSystemdSpawner
user = SimpleNamespace(name="p2500001", id=1, url="/user/p2500001/", groups=[],
                       escaped_name="p2500001")
hub = SimpleNamespace(url="http://127.0.0.1:8081/hub/", api_url="http://127.0.0.1:8081/hub/api",
                      base_url="/hub/", public_host="")
spawner = CoursehubSystemdSpawner(user=user, hub=hub)
spawner.unit_name, spawner.mem_limit = sys.argv[1], int(sys.argv[2])
shown = subprocess.run(["systemctl", "show", sys.argv[1], "-p", "Result", "-p", "ExecMainCode",
                        "-p", "ExecMainStatus"], capture_output=True, text=True).stdout
print(json.dumps({"notice": asyncio.run(spawner.describe_exit(1, None)), "shown": shown}))
"""


def _unit() -> str:
    return f"jupyter-exitnotice-{uuid.uuid4().hex[:6]}-singleuser"


def _run_unit(box: Container, unit: str, mem_limit: int, command: str) -> None:
    """Start ``command`` as a transient service, as SystemdSpawner does (``systemd-run``)."""
    started = box.sh(
        f"systemd-run --unit={unit} --property=MemoryMax={mem_limit} "
        f"--property=MemorySwapMax=0 {command}"
    )
    assert started.returncode == 0, started.stderr


def _wait_ended(box: Container, unit: str) -> str:
    """Wait (at most 30 s) until the unit is no longer active; return its ActiveState."""
    waited = box.sh(
        f"for i in $(seq 300); do s=$(systemctl show -p ActiveState --value {unit}); "
        'case "$s" in active|activating|deactivating) sleep 0.1;; *) echo "$s"; exit 0;; esac; '
        "done; echo still-active",
        timeout=60,
    )
    return waited.stdout.strip()


def _read_notice(box: Container, unit: str, mem_limit: int) -> dict[str, str]:
    python = REPO / ".venv/bin/python"
    read = box.sh(f"cd / && {python} -c '{READ_NOTICE}' {unit} {mem_limit}")
    assert read.returncode == 0, read.stdout + read.stderr
    return json.loads(read.stdout.strip().splitlines()[-1])


def test_a_server_unit_killed_by_sigkill_gives_the_signal_9_notice(container):  # noqa: F811
    unit, mem_limit = _unit(), 2 * 1024**3
    _run_unit(container, unit, mem_limit, "/bin/sleep 600")
    main = container.sh(f"systemctl show -p MainPID --value {unit}").stdout.strip()
    assert main.isdigit() and main != "0", main
    assert container.sh(f"kill -9 {main}").returncode == 0
    assert _wait_ended(container, unit) == "failed"
    read = _read_notice(container, unit, mem_limit)
    assert "Result=signal" in read["shown"] and "ExecMainStatus=9" in read["shown"], read
    assert read["notice"] == "Your server stopped unexpectedly: killed by signal 9 (SIGKILL).", read
    container.sh(f"systemctl reset-failed {unit}")


#: Takes memory 16 MiB at a time (written), up to 1 GiB, then ends normally.
GROW = "/usr/bin/python3 -c \"blocks = [b'x' * (16 << 20) for _ in range(64)]\""


def _memory_cgroup(box: Container, unit: str) -> str:
    """Return the memory cgroup of the unit's main process ("" for none), from /proc/PID/cgroup."""
    main = box.sh(f"systemctl show -p MainPID --value {unit}").stdout.strip()
    lines = box.sh(f"cat /proc/{main}/cgroup").stdout.splitlines()
    v1 = [line.split(":", 2)[2] for line in lines if line.split(":")[1:2] == ["memory"]]
    if v1:
        return v1[0]
    v2 = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    has_memory = v2 and "memory" in box.sh(f"cat /sys/fs/cgroup{v2[0]}/cgroup.controllers").stdout
    return v2[0] if has_memory else ""


def test_a_server_unit_over_its_memory_max_gives_the_out_of_memory_notice(container):  # noqa: F811
    unit, mem_limit = _unit(), 128 * 1024**2
    _run_unit(container, unit, mem_limit, "/bin/sleep 600")
    shown = container.sh(f"systemctl show -p MemoryMax --value {unit}").stdout.strip()
    assert shown == str(mem_limit)  # the unit has the limit SystemdSpawner gives it
    placed = _memory_cgroup(container, unit)
    container.sh(f"systemctl stop {unit}; systemctl reset-failed {unit}")
    if not placed.endswith(f"/{unit}.service"):
        pytest.skip(
            f"MemoryMax is not enforced in this container: the unit's process is in the "
            f"memory cgroup {placed or '(none)'!r}, not its own (the host's cgroup v1 memory "
            "hierarchy is not delegated to the container's systemd)"
        )
    unit = _unit()
    _run_unit(container, unit, mem_limit, GROW)
    assert _wait_ended(container, unit) == "failed"
    read = _read_notice(container, unit, mem_limit)
    container.sh(f"systemctl reset-failed {unit}")
    assert "Result=oom-kill" in read["shown"], read
    assert read["notice"] == (
        "Your server stopped unexpectedly: out of memory "
        "(it reached its memory limit of 128.0 MiB)."
    ), read
