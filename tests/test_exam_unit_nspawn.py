"""An exam server's unit reaches only the hub over IP, checked on a booted systemd (Debian 12).

:func:`coursehub.examroom.server.plan_unit_network` gives a SystemdSpawner
exam server's transient unit ``IPAddressDeny=any`` and ``IPAddressAllow=``
the hub's addresses (systemd.resource-control(5)). Here the container of
tests/nspawnbox.py (the fixture of test_deploy_nspawn.py) runs a unit with
those properties, as SystemdSpawner starts one (``systemd-run``), whose
process connects to a listener of the container on an allowed address and
on one that is not. systemd enforces the properties with a BPF program
attached to the unit's cgroup, which needs the unified (v2) cgroup
hierarchy and the ``bpf()`` system call: the container is booted with both
(:data:`nspawnbox.IP_FILTER`). Where its systemd still cannot, the test is
skipped with what it found.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from coursehub.examroom.server import plan_unit_network
from nspawnbox import IP_FILTER, MARKS, Container, boot

pytestmark = MARKS


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """A Debian 12 container whose systemd can filter a unit's IP traffic."""
    with boot(tmp_path_factory.mktemp("nspawn") / "console.log", **IP_FILTER) as box:
        yield box


#: A listener on every address of the container's loopback, outside the unit.
LISTEN = (
    "nohup python3 -c 'import socket, time\n"
    's = socket.create_server(("0.0.0.0", 8999))\n'
    "while True: s.accept()[0].close()' >/dev/null 2>&1 &"
)
#: Run in the unit: connect to each address given, print what happened as JSON.
PROBE = (
    "import json, socket, sys\n"
    "said = {}\n"
    "for host in sys.argv[1:]:\n"
    "    try:\n"
    "        socket.create_connection((host, 8999), timeout=3).close(); said[host] = 'connected'\n"
    "    except OSError as exc:\n"
    "        said[host] = exc.strerror or type(exc).__name__\n"
    "print(json.dumps(said))\n"
)


def test_an_exam_servers_unit_connects_to_the_hubs_address_and_to_no_other(container):
    properties = plan_unit_network(("127.0.0.1",))
    container.sh(LISTEN)
    container.path("/root/probe.py").write_text(PROBE)
    # the listener started in the background: wait until it answers, outside any unit
    waited = container.sh(
        "for i in $(seq 100); do python3 /root/probe.py 127.0.0.1 | grep -q connected && "
        "exit 0; sleep 0.1; done; exit 1",
        timeout=60,
    )
    assert waited.returncode == 0, "the listener did not answer on 127.0.0.1:8999"
    unit = f"jupyter-examnet-{uuid.uuid4().hex[:6]}-singleuser"
    options = " ".join(f"--property={k}={v!r}" for k, v in properties.items())
    ran = container.sh(
        f"systemd-run --unit={unit} --wait --pipe --quiet {options} "
        "python3 /root/probe.py 127.0.0.1 127.0.0.2",
        timeout=60,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    assert said["127.0.0.1"] == "connected", said  # the hub's address
    if said["127.0.0.2"] == "connected":
        # systemd attaches its IP filter to the unit's cgroup in the unified hierarchy only
        hierarchy = container.sh("stat -fc %T /sys/fs/cgroup").stdout.strip()
        journal = container.sh("journalctl --no-pager -o cat | grep -i 'bpf' | tail -2").stdout
        pytest.skip(
            "IPAddressDeny= is not enforced in this container: the unit connected to "
            f"127.0.0.2; its /sys/fs/cgroup is {hierarchy!r} (cgroup2fs needed for systemd's "
            f"BPF filter); systemd said: {journal.strip() or '(nothing about BPF)'}"
        )
    # the filter drops the packets: the connection fails (timed out, or refused by the kernel)
    assert said["127.0.0.2"] in ("TimeoutError", "Operation not permitted"), said
