"""``coursehub hub config``: a spawner whose runner jobs go unmetered says so when rendered.

Before, the systemd and Slurm servers got no ``COURSEHUB_USAGE_DIR`` and their
``coursehub run`` jobs wrote no usage, with no warning anywhere. The systemd
units now get the folder (tests/test_usage_systemd.py); a Slurm job runs on a
compute node that does not reach it, and the render says so on stderr, as
``--lti`` does for plain HTTP.
"""

from __future__ import annotations

import pytest

from coursehub.cli import main


@pytest.mark.parametrize(
    ("kind", "warned"), [("slurm", True), ("systemd", False), ("local", False)]
)
def test_a_spawner_whose_runner_jobs_are_not_metered_is_warned_at_render(kind, warned, capsys):
    assert main(["hub", "config", "--spawner", kind]) == 0
    captured = capsys.readouterr()
    assert "c.JupyterHub.spawner_class" in captured.out
    lines = [line for line in captured.err.splitlines() if "not metered" in line]
    if warned:
        assert lines == [
            f"coursehub: warning: --spawner {kind}: runner jobs (coursehub run) started in a "
            "server are not metered: the compute nodes do not reach the hub's usage folder "
            "(Slurm's own accounting has the servers)"
        ]
    else:
        assert lines == []
