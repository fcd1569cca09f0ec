"""Following a Slurm job gives up after the stated time when the controller is down.

The report: while slurmctld was down each ``scontrol`` waited ~15 s before it
failed, and the runner counted only its pauses (0.25 s each) towards its
30 s limit, so it gave up after ~30 minutes. Here a fake ``scontrol`` takes
the whole timeout it is given (as one does against a dead controller) on a
fake clock: the runner must give up once 30 s of that clock have passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coursehub.runner.job import JobSpec
from coursehub.runner.slurm import backend as slurm_backend
from coursehub.runner.slurm import commands as slurm_commands
from coursehub.runner.slurm.backend import UNREACHABLE_GIVE_UP_S, SlurmBackend, SlurmJob
from coursehub.runner.slurm.commands import SlurmUnreachableError, UnreachableDeadline


class FakeTime:
    """A clock that moves only when something sleeps or waits on it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_deadline_counts_the_calls_own_time() -> None:
    clock = FakeTime()
    deadline = UnreachableDeadline(30, clock.monotonic)
    assert deadline.call_timeout_s(15) == 15
    asked_at = clock.monotonic()
    clock.sleep(15)  # a call that waited its whole timeout
    deadline.failed(asked_at)  # the count starts when that call was made
    deadline.failed()  # a later failure does not restart it
    assert deadline.left_s() == 15 and not deadline.expired()
    clock.sleep(10)
    assert deadline.call_timeout_s(15) == 5  # the next call may not outlast the limit
    clock.sleep(5)
    assert deadline.expired()
    deadline.answered()
    assert deadline.left_s() == 30 and not deadline.expired()


@pytest.mark.parametrize("scontrol_wait_s", [15.0, 0.01])
def test_a_job_followed_while_slurmctld_is_down_gives_up_after_30_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scontrol_wait_s: float
) -> None:
    clock = FakeTime()
    monkeypatch.setattr(slurm_backend, "time", clock)
    monkeypatch.setattr(slurm_commands, "time", clock)
    timeouts: list[float] = []

    def dead_scontrol(job_id: str, timeout_s: float = 15) -> None:
        timeouts.append(timeout_s)
        clock.sleep(min(scontrol_wait_s, timeout_s))
        raise SlurmUnreachableError("Slurm is unreachable: scontrol gave no answer")

    monkeypatch.setattr(slurm_backend, "job_info", dead_scontrol)
    backend = SlurmBackend(runs_dir=tmp_path, poll_s=0.25)
    job = SlurmJob(backend, JobSpec(target="train.py"), "4242", tmp_path / "slurm-4242.log")
    started = clock.now
    with pytest.raises(SlurmUnreachableError):
        job._execute()
    assert UNREACHABLE_GIVE_UP_S == 30
    # given up once 30 s had passed, never a full call or pause later
    assert 30 <= clock.now - started <= 30 + 1.0 + backend.poll_s
    assert max(timeouts) <= 15
