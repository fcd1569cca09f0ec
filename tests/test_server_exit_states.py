"""Why a systemd or Slurm server ended, on the student's page: pure mappings and the mixins.

The report (jupyterhub/systemdspawner#87, #7): after ``kill -9`` the student
only met 503 pages; the local spawners now say "Your server stopped
unexpectedly" and why (:mod:`coursehub.spawn.serverexit`). These tests hold
the systemd and Slurm spawners to the same: the unit's ``Result`` and the
job's ``JobState``/``ExitCode`` in words, recorded when the hub's poll finds
the server gone, and never for a stop the hub asked for.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from jupyterhub.spawner import Spawner

from coursehub.spawn import serverexit, slurmwatch
from coursehub.spawn.exitstates import (
    describe_slurm_exit,
    describe_systemd_exit,
    parse_key_values,
    parse_slurm_exit_code,
)
from coursehub.spawn.serverexit import (
    STOP_NOTICES,
    SlurmStopNoticeMixin,
    SystemdStopNoticeMixin,
)
from coursehub.spawn.slurmwatch import SlurmJobWatchMixin, ended_job_ids, parse_job_states

GIB = 1024**3
SCONTROL_OOM = (
    "JobId=42 JobName=spawner-jupyterhub UserId=ann(1001) JobState=OUT_OF_MEMORY "
    "Reason=OutOfMemory Dependency=(null) Requeue=0 ExitCode=0:125 RunTime=00:01:02"
)


@pytest.mark.parametrize(
    ("state", "exit_code", "expected"),
    [
        ("OUT_OF_MEMORY", "0:125", "out of memory (it reached its memory limit of 1.0 GiB)"),
        ("CANCELLED by 0", "0:15", "its Slurm job was cancelled"),
        ("CANCELLED", "0:9", "its Slurm job was cancelled"),
        ("NODE_FAIL", "0:0", "the compute node that ran it failed"),
        ("TIMEOUT", "0:1", "its Slurm job reached its time limit"),
        ("PREEMPTED", "0:0", "preempted"),
        ("FAILED", "0:9", "killed by signal 9 (SIGKILL)"),
        ("FAILED", "137:0", "killed by signal 9 (SIGKILL)"),
        ("FAILED", "3:0", "it exited with status 3"),
        ("COMPLETED", "0:0", "Your server stopped unexpectedly."),
        ("", "", "Your server stopped unexpectedly."),
    ],
)
def test_a_slurm_job_state_says_why_the_server_ended(state, exit_code, expected):
    text = describe_slurm_exit(state, exit_code, GIB)
    assert text.startswith("Your server stopped unexpectedly")
    assert expected in text


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"Result": "oom-kill", "ExecMainCode": "2", "ExecMainStatus": "9"}, "out of memory"),
        ({"Result": "signal", "ExecMainCode": "2", "ExecMainStatus": "9"}, "signal 9 (SIGKILL)"),
        ({"Result": "core-dump", "ExecMainStatus": "11"}, "killed by signal 11 (SIGSEGV)"),
        ({"Result": "exit-code", "ExecMainCode": "1", "ExecMainStatus": "3"}, "with status 3"),
        ({"Result": "timeout"}, "systemd stopped it after a timeout"),
        ({"Result": "success", "ExecMainStatus": "0"}, "Your server stopped unexpectedly."),
        ({}, "Your server stopped unexpectedly."),
    ],
)
def test_a_systemd_unit_result_says_why_the_server_ended(props, expected):
    assert expected in describe_systemd_exit(props, GIB)


def test_scontrol_and_systemctl_fields_are_read():
    fields = parse_key_values(SCONTROL_OOM)
    assert fields["JobState"] == "OUT_OF_MEMORY"
    assert fields["ExitCode"] == "0:125"
    assert parse_key_values("Result=oom-kill\nExecMainStatus=9\n") == {
        "Result": "oom-kill",
        "ExecMainStatus": "9",
    }
    assert parse_slurm_exit_code("137:0") == (137, 0)
    assert parse_slurm_exit_code("bad") == (0, 0)


class FakeBatchSpawner:
    """batchspawner's poll (a job found gone clears its id) under JupyterHub's own
    ``Spawner.poll_and_notify``, which runs the stop callbacks after the poll."""

    poll_and_notify = Spawner.poll_and_notify

    def __init__(self, status: int | None) -> None:
        self.status = status
        self.job_id = "42"
        self.unit_name = "jupyter-hub-ann-singleuser"
        self.user = SimpleNamespace(name=f"ann-{uuid.uuid4().hex[:8]}")
        self.name = ""
        self.mem_limit = GIB
        self.log = SimpleNamespace(warning=lambda *a: None, exception=lambda *a: None)
        self._callbacks: list[Any] = []

    async def poll(self) -> int | None:
        if self.status is not None:
            self.job_id = ""
        return self.status

    def stop_polling(self) -> None:
        pass

    async def start(self) -> Any:
        return ("127.0.0.1", 8888)


class SlurmLike(SlurmStopNoticeMixin, FakeBatchSpawner):
    pass


class SystemdLike(SystemdStopNoticeMixin, FakeBatchSpawner):
    pass


def _fake_command(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]) -> list[list[str]]:
    calls: list[list[str]] = []

    async def read_command(argv: list[str], timeout_s: float = 5.0) -> str:
        calls.append(argv)
        return outputs.get(argv[0], "")

    monkeypatch.setattr(serverexit, "read_command", read_command)
    return calls


def _notice(spawner: Any) -> str | None:
    return STOP_NOTICES.for_user(spawner.user).get("")


def test_a_slurm_server_found_gone_leaves_the_jobs_reason(monkeypatch):
    calls = _fake_command(monkeypatch, {"scontrol": SCONTROL_OOM})
    spawner = SlurmLike(status=1)
    assert asyncio.run(spawner.poll_and_notify()) == 1
    assert calls == [["scontrol", "show", "job", "-o", "42"]]  # the id from before the poll
    assert "out of memory (it reached its memory limit of 1.0 GiB)" in (_notice(spawner) or "")
    asyncio.run(spawner.start())  # a new start forgets it
    assert _notice(spawner) is None


def test_the_notice_is_there_when_the_hub_marks_the_server_stopped(monkeypatch):
    """The hub's stop callback (which lets the 'not running' page render) sees the notice."""
    _fake_command(monkeypatch, {"scontrol": SCONTROL_OOM})
    seen: list[str | None] = []
    for spawner in (SlurmLike(status=1), SystemdLike(status=1)):
        spawner._callbacks.append(lambda s=spawner: seen.append(_notice(s)))
        asyncio.run(spawner.poll_and_notify())
    assert len(seen) == 2 and all(text and "stopped unexpectedly" in text for text in seen)
    plain = SlurmLike(status=1)
    asyncio.run(plain.poll())  # a poll of the hub's own (a requested stop, a start-up check)
    assert _notice(plain) is None


def test_a_running_slurm_server_leaves_no_notice(monkeypatch):
    calls = _fake_command(monkeypatch, {"scontrol": SCONTROL_OOM})
    spawner = SlurmLike(status=None)
    assert asyncio.run(spawner.poll_and_notify()) is None
    assert calls == []
    assert _notice(spawner) is None


def test_a_systemd_server_found_gone_leaves_the_units_reason(monkeypatch):
    out = "Result=signal\nExecMainCode=2\nExecMainStatus=9\n"
    calls = _fake_command(monkeypatch, {"systemctl": out})
    spawner = SystemdLike(status=1)
    asyncio.run(spawner.poll_and_notify())
    assert calls[0][:3] == ["systemctl", "show", "jupyter-hub-ann-singleuser"]
    assert _notice(spawner) == "Your server stopped unexpectedly: killed by signal 9 (SIGKILL)."


def test_an_unanswered_query_still_says_the_server_stopped(monkeypatch):
    _fake_command(monkeypatch, {})  # scontrol down or the job forgotten
    spawner = SlurmLike(status=1)
    asyncio.run(spawner.poll_and_notify())
    assert _notice(spawner) == "Your server stopped unexpectedly."


def test_read_command_gives_up_on_a_slow_or_missing_command():
    assert asyncio.run(serverexit.read_command(["sleep", "5"], timeout_s=0.2)) == ""
    assert asyncio.run(serverexit.read_command(["/nonexistent/scontrol"])) == ""
    assert asyncio.run(serverexit.read_command(["false"])) == ""
    assert asyncio.run(serverexit.read_command(["echo", "JobState=FAILED"])) == "JobState=FAILED\n"


def test_a_completing_slurm_job_counts_as_ended_so_the_next_poll_sees_it():
    from test_spawner_classes import make_spawner

    spawner = make_spawner("slurm")
    spawner.job_status = "COMPLETING vm"  # the batch script, hence the server, has exited
    assert not spawner.state_isrunning()
    spawner.job_status = "RUNNING vm"
    assert spawner.state_isrunning()


SQUEUE_JOBS = "41 RUNNING\n42 FAILED\n43 COMPLETING\n44 PENDING\n"


def test_the_job_watch_reads_squeue_and_finds_the_jobs_batchspawner_counts_as_ended():
    from coursehub.spawn.slurmspawner import RUNNING_STATES_RE

    states = parse_job_states(SQUEUE_JOBS + "\nslurm_load_jobs error\n")
    assert states == {"41": "RUNNING", "42": "FAILED", "43": "COMPLETING", "44": "PENDING"}
    pending_re = r"^(?:PENDING|CONFIGURING)"  # batchspawner's SlurmSpawner.state_pending_re
    watched = ["41", "42", "43", "44", "45"]  # 45: not listed (forgotten, or hidden)
    assert ended_job_ids(states, watched, RUNNING_STATES_RE, pending_re) == ["42", "43"]


class FakeSlurmSpawner(FakeBatchSpawner):
    """The fake batchspawner poll with SlurmSpawner's states and JupyterHub's polling hooks."""

    state_running_re = r"^RUNNING"
    state_pending_re = r"^(?:PENDING|CONFIGURING)"
    pending: str | None = None

    def start_polling(self) -> None:
        pass


class WatchedSlurm(SlurmJobWatchMixin, SlurmStopNoticeMixin, FakeSlurmSpawner):
    """coursehub's Slurm spawner (job watch and notice) over the fake batchspawner."""


def _fake_watch(monkeypatch: pytest.MonkeyPatch, squeue: str) -> tuple[Any, list[list[str]]]:
    queries: list[list[str]] = []

    async def query(argv: list[str]) -> str:
        queries.append(argv)
        return squeue

    watch = slurmwatch.SlurmJobWatch(interval_s=3600, query=query)
    monkeypatch.setattr(slurmwatch, "SLURM_JOB_WATCH", watch)
    return watch, queries


def test_one_query_for_all_servers_runs_the_poll_of_a_server_whose_job_ended(monkeypatch):
    _fake_command(monkeypatch, {"scontrol": SCONTROL_OOM})
    watch, queries = _fake_watch(monkeypatch, SQUEUE_JOBS)
    stopped: list[str] = []

    async def scenario() -> list[Any]:
        spawners = [WatchedSlurm(status=None) for _ in range(3)]
        for spawner, job_id in zip(spawners, ("41", "42", "44"), strict=True):
            spawner.job_id = job_id
            spawner._callbacks.append(lambda s=spawner: stopped.append(s.job_id))
            spawner.start_polling()
        spawners[1].status = 1  # batchspawner's own query confirms job 42 ended
        ended = await watch.check()
        assert ended == [spawners[1]]
        await spawners[1]._job_check
        return spawners

    spawners = asyncio.run(scenario())
    assert queries == [[*slurmwatch.SQUEUE_ARGV, "--jobs=41,42,44"]]
    assert stopped == [""]  # the stop callbacks ran once (the poll cleared the job id)
    assert "out of memory" in (_notice(spawners[1]) or "")
    assert _notice(spawners[0]) is None and _notice(spawners[2]) is None
    assert watch.watched() == [spawners[0], spawners[2]]  # poll_and_notify's stop_polling


def test_the_job_watch_leaves_a_spawn_or_a_stop_to_jupyterhub(monkeypatch):
    watch, _ = _fake_watch(monkeypatch, "41 FAILED\n42 FAILED\n43 FAILED\n")

    async def scenario() -> list[Any]:
        starting, stopping, unregistered = (WatchedSlurm(status=1) for _ in range(3))
        starting.pending, stopping.pending = "spawn", "stop"
        for spawner in (starting, stopping):  # unregistered: no stop callbacks yet
            spawner._callbacks.append(lambda: None)
        for spawner, job_id in zip((starting, stopping, unregistered), "123", strict=True):
            spawner.job_id = f"4{job_id}"
            spawner.start_polling()
        assert await watch.check() == [starting, stopping, unregistered]
        return [starting, stopping, unregistered]

    for spawner in asyncio.run(scenario()):
        assert spawner._job_check is None
        assert spawner.job_id != ""  # never polled (a poll that finds it gone clears it)


def test_the_job_watch_ends_with_its_last_server_and_a_failed_query_notices_nothing(monkeypatch):
    watch, queries = _fake_watch(monkeypatch, "")  # squeue failed: read_command's ""

    async def scenario() -> WatchedSlurm:
        spawner = WatchedSlurm(status=1)
        spawner.job_watch_interval = 0.01
        spawner._callbacks.append(lambda: None)
        spawner.start_polling()
        await asyncio.sleep(0.1)
        assert queries and watch.watched() == [spawner]
        spawner.stop_polling()  # a stop the hub asked for
        await asyncio.sleep(0.1)
        assert watch._task is None  # the loop ended with its last server
        return spawner

    spawner = asyncio.run(scenario())
    assert spawner._job_check is None and spawner.job_id == "42"  # never polled
