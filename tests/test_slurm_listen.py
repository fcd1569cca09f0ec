"""A Slurm server's start returns once the server listens, not once its port is known.

batchspawner's start returned when ``batchspawner-singleuser`` sent its port,
2-3 s before Jupyter Server listened; the hub's growing back-off then saw
the server 1.5-3.6 s late (benchmarks/bench_slurm_start.py). Real sockets here.
"""

from __future__ import annotations

import asyncio
import socket
import time

from coursehub.spawn.slurmspawner import wait_listening


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_port_that_starts_listening_later_is_found_within_one_interval():
    port = _free_port()

    async def scenario() -> tuple[bool, float]:
        async def listen_later() -> asyncio.Server:
            await asyncio.sleep(0.5)
            return await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)

        opening = asyncio.ensure_future(listen_later())
        started = time.monotonic()
        found = await wait_listening("127.0.0.1", port, 0.05, 10.0)
        waited = time.monotonic() - started
        server = await opening
        server.close()
        await server.wait_closed()
        return found, waited

    found, waited = asyncio.run(scenario())
    assert found
    assert 0.5 <= waited < 2.0


def test_a_port_nobody_listens_on_gives_up_after_the_timeout():
    started = time.monotonic()
    assert asyncio.run(wait_listening("127.0.0.1", _free_port(), 0.05, 0.3)) is False
    assert time.monotonic() - started < 2.0


def test_a_job_that_ended_stops_the_wait_at_its_next_check(monkeypatch):
    from coursehub.spawn import slurmspawner

    monkeypatch.setattr(slurmspawner, "JOB_CHECK_EVERY_S", 0.2)
    asked: list[float] = []

    async def ended() -> bool:
        asked.append(time.monotonic())
        return False

    started = time.monotonic()
    found = asyncio.run(wait_listening("127.0.0.1", _free_port(), 0.05, 30.0, ended))
    assert found is False and len(asked) == 1
    assert time.monotonic() - started < 2.0
