"""The students' assignment list shows submission times in the course's zone (nbgrader#1932)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from traitlets.config.loader import PyFileConfigLoader

from coursehub.grading.deadline import published_path
from coursehub.grading.studentconfig import render_student_config
from coursehub.grading.studentlist import format_submitted
from test_grading_e2e import CORRECT, PS, answer_assignment, new_course

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("recorded", "zone", "shown"),
    [
        # the dst-due-shown-utc case: 00:10 the day after the spring change is late
        (
            "2025-03-30 22:10:00.000000 UTC",
            "Europe/Paris",
            "2025-03-31 00:10:00 CEST (Europe/Paris)",
        ),
        (
            "2025-03-30 21:30:00.000000 UTC",
            "Europe/Paris",
            "2025-03-30 23:30:00 CEST (Europe/Paris)",
        ),
        (
            "2025-10-26 22:30:00.000000 UTC",
            "Europe/Paris",
            "2025-10-26 23:30:00 CET (Europe/Paris)",
        ),
        ("2025-03-30 22:10:00.000000 UTC", "UTC", "2025-03-30 22:10:00 UTC"),
        ("not a time", "Europe/Paris", "not a time"),
        ("2025-03-30 22:10:00.000000 UTC", "Mars/Olympus", "2025-03-30 22:10:00.000000 UTC"),
    ],
)
def test_a_recorded_submission_time_is_shown_in_the_zone(recorded, zone, shown):
    assert format_submitted(recorded, zone) == shown


def list_submissions(tmp_path: Path, exchange_root: Path, home: Path, zone: str) -> list[str]:
    """Run nbgrader's list as the Lab's Assignment List does, with the students' config."""
    path = tmp_path / "nbgrader_config.py"
    path.write_text(render_student_config(exchange_root, timezone=zone))
    config = PyFileConfigLoader(path.name, path=str(tmp_path)).load_config()
    config.Authenticator.plugin_class = "nbgrader.auth.NoAuthPlugin"  # no hub here
    config.Exchange.cache = str(home / ".nbgrader_cache")
    config.Exchange.assignment_dir = str(home)
    config.ExchangeList.cached = True  # the submitted list (server extension's handler)
    lister = ExchangeFactory(config=config).List(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    [assignment] = lister.start()
    return [info["timestamp"] for info in assignment["submissions"]]


def test_the_students_list_shows_their_submission_in_the_courses_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_GRADING_TIMEZONE", "Europe/Paris")
    layout = new_course(tmp_path, "phys-2025")  # published: ps1 in Europe/Paris
    answer_assignment(layout, tmp_path, PS, "ana", CORRECT)
    home = tmp_path / "home" / "ana"
    [cached] = (home / ".nbgrader_cache" / "phys-2025").iterdir()
    recorded = (cached / "timestamp.txt").read_text()
    assert recorded.endswith(" UTC")  # recorded in UTC, which nbgrader reads back
    # the assignment's published zone, whatever the config's
    shown = list_submissions(tmp_path, layout.exchange_root, home, "America/New_York")
    assert shown == [format_submitted(recorded, "Europe/Paris")]
    assert shown[0].endswith(("CET (Europe/Paris)", "CEST (Europe/Paris)"))
    published_path(layout.exchange_root, "phys-2025").unlink()  # none published: the config's
    shown = list_submissions(tmp_path, layout.exchange_root, home, "America/New_York")
    assert shown[0].endswith(("EST (America/New_York)", "EDT (America/New_York)"))
