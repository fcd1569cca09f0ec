"""Creating an assignment from the course page: checks first, nothing written on bad input."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import stream_encode_multipart

from coursehub.errors import UsageError
from coursehub.grading.create import (
    MAX_NOTEBOOK_BYTES,
    check_notebook_upload,
    list_material_notebooks,
    material_dir,
    parse_duedate,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.latepolicy import (
    LatePolicy,
    late_policy,
    parse_late_policy,
    plan_late_penalty,
)
from coursehub.grading.layout import ensure_course, layout_from_env
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from helpers import csrf_token

PAGE = "/courses/mlmeca-2025/grading"
TEACHER = identity_headers(IDENTITIES["teacher"])
SOURCE = (demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb").read_bytes()
PLAIN = json.dumps(
    {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": "1",
                "outputs": [],
                "execution_count": None,
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
).encode()


@pytest.mark.parametrize(
    ("method", "points", "expected"),
    [
        ("none", None, LatePolicy("none")),
        ("zero", "3", LatePolicy("zero")),
        ("per_hour", "1.5", LatePolicy("per_hour", 1.5)),
    ],
)
def test_a_late_policy_is_read_from_its_form_fields(method, points, expected):
    assert parse_late_policy(method, points) == expected


@pytest.mark.parametrize(
    ("method", "points", "message"),
    [
        ("linear", None, "late-submission policy 'linear' is unknown"),
        ("per_hour", "", "must be a number above 0"),
        ("per_hour", "-1", "must be a number above 0"),
        ("per_hour", "nan", "must be a number above 0"),
        ("per_hour", "lots", "must be a number above 0"),
    ],
)
def test_a_bad_late_policy_is_refused_with_what_is_wrong(method, points, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_late_policy(method, points)


@pytest.mark.parametrize(
    ("policy", "score", "seconds_late", "penalty"),
    [
        (LatePolicy("none"), 4.0, 7200, None),
        (LatePolicy("zero"), 4.0, 0, None),
        (LatePolicy("zero"), 4.0, 1, 4.0),
        (LatePolicy("per_hour", 1.0), 4.0, 2 * 3600, 2.0),
        (LatePolicy("per_hour", 1.0), 4.0, 1799, 0.0),  # nbgrader's example rounds the hours
        (LatePolicy("per_hour", 0.5), 4.0, 3 * 3600 + 1800, 2.0),
        (LatePolicy("per_hour", 2.0), 4.0, 0, None),
    ],
)
def test_the_penalty_follows_the_policy(policy, score, seconds_late, penalty):
    assert plan_late_penalty(policy, score, seconds_late) == penalty


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("2025-03-01T18:00", "Europe/Paris", datetime(2025, 3, 1, 17, 0, tzinfo=UTC)),
        ("2025-07-01T18:00", "Europe/Paris", datetime(2025, 7, 1, 16, 0, tzinfo=UTC)),  # summer
        ("2025-03-01 18:00:30", "UTC", datetime(2025, 3, 1, 18, 0, 30, tzinfo=UTC)),
        ("", "UTC", None),
    ],
)
def test_a_due_date_is_read_in_its_time_zone_and_kept_in_utc(text, zone, expected):
    assert parse_duedate(text, zone) == expected


@pytest.mark.parametrize(
    ("text", "zone", "message"),
    [
        ("2025-03-01T18:00", "Mars/Olympus", "time zone 'Mars/Olympus' is unknown"),
        ("next friday", "UTC", "due date 'next friday': expected YYYY-MM-DD HH:MM"),
    ],
)
def test_a_bad_due_date_or_zone_is_refused(text, zone, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_duedate(text, zone)


@pytest.mark.parametrize(
    ("filename", "data", "message"),
    [
        ("ps1.ipynb", b"{ this is not json", "is not a notebook: not JSON"),
        ("ps1.ipynb", b"\xff\xfe\x00", "is not a notebook: not JSON"),
        ("ps1.ipynb", b"[1, 2]", "is not a valid notebook"),
        ("ps1.ipynb", PLAIN, "has no nbgrader cells"),
        ("../../etc/evil.ipynb", SOURCE, "give a plain file name NAME.ipynb"),
        ("..\\evil.ipynb", SOURCE, "give a plain file name NAME.ipynb"),
        (".hidden.ipynb", SOURCE, "give a plain file name NAME.ipynb"),
        ("ps1.py", SOURCE, "a notebook (.ipynb) is needed"),
        ("ps1.ipynb", b"", "is empty"),
        ("ps1.ipynb", b" " * (MAX_NOTEBOOK_BYTES + 1), "above the limit of 3 MiB"),
    ],
)
def test_a_bad_notebook_is_refused_before_anything_is_written(filename, data, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        check_notebook_upload(filename, data, "ps1")


def test_a_notebook_with_nbgrader_cells_passes():
    assert check_notebook_upload(" pendulum.ipynb ", SOURCE, "ps1") == "pendulum.ipynb"


# --- the course page ----------------------------------------------------------


@pytest.fixture
def layout(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_TIMEZONE", "Europe/Paris")
    made = layout_from_env("mlmeca-2025")
    ensure_course(made)
    return made


@pytest.fixture
def client(database_url, layout):
    seed_web_catalog(database_url)
    app = make_test_app(database_url)
    yield app.test_client()
    dispose_app(app)


def token(client, headers=TEACHER) -> str:
    return csrf_token(client.get(f"{PAGE}/new", headers=headers).get_data(as_text=True))


def upload(client, name, filename, data, **fields):
    from io import BytesIO

    form = {
        "csrf_token": token(client),
        "assignment": name,
        "notebook": FileStorage(BytesIO(data), filename, content_type="application/x-ipynb+json"),
        "duedate": "2025-03-01T18:00",
        "timezone": "Europe/Paris",
        "late_method": "per_hour",
        "points_per_hour": "1",
        **fields,
    }
    # encoded in memory: the test client would spool a large body to a file it never closes
    stream, length, boundary = stream_encode_multipart(form, use_tempfile=False)
    return client.post(
        f"{PAGE}/new",
        headers={**TEACHER, "Content-Length": str(length)},
        data=stream.getvalue(),
        content_type=f"multipart/form-data; boundary={boundary}",
    )


def gradebook_assignments(layout) -> dict[str, datetime | None]:
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        return {a.name: a.duedate for a in gradebook.assignments}


def test_a_teacher_creates_an_assignment_with_its_due_date_and_policy(client, layout):
    answer = upload(client, "ps1", "pendulum_energy.ipynb", SOURCE)
    assert answer.status_code == 302
    assert (layout.course_dir / "source" / "ps1" / "pendulum_energy.ipynb").read_bytes() == SOURCE
    assert gradebook_assignments(layout) == {"ps1": datetime(2025, 3, 1, 17, 0)}  # naive UTC
    assert late_policy(layout, "ps1") == LatePolicy("per_hour", 1.0)
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    assert "2025-03-01 18:00 CET (Europe/Paris)" in page and "1 point(s) off per hour late" in page


@pytest.mark.parametrize(
    ("name", "filename", "data", "fields", "message"),
    [
        ("ps1", "ps1.ipynb", b"{ not json", {}, "is not a notebook: not JSON"),
        ("ps1", "ps1.ipynb", PLAIN, {}, "has no nbgrader cells"),
        ("ps1", "../../evil.ipynb", SOURCE, {}, "give a plain file name"),
        ("../ps1", "ps1.ipynb", SOURCE, {}, "assignment name &#39;../ps1&#39; must be"),
        ("ps1", "ps1.ipynb", b" " * (MAX_NOTEBOOK_BYTES + 1), {}, "above the limit of 3 MiB"),
        ("ps1", "ps1.ipynb", SOURCE, {"timezone": "Nowhere/City"}, "is unknown"),
        ("ps1", "ps1.ipynb", SOURCE, {"points_per_hour": "x"}, "must be a number above 0"),
    ],
)
def test_bad_input_is_explained_and_nothing_is_written(
    client, layout, name, filename, data, fields, message
):
    before = sorted(p.relative_to(layout.course_dir) for p in layout.course_dir.rglob("*"))
    answer = upload(client, name, filename, data, **fields)
    assert answer.status_code == 400
    text = answer.get_data(as_text=True)
    assert message in text and "nothing was written" in text
    assert not (layout.course_dir / "source").exists() or not any(
        (layout.course_dir / "source").iterdir()
    )
    assert gradebook_assignments(layout) == {}
    after = sorted(p.relative_to(layout.course_dir) for p in layout.course_dir.rglob("*"))
    assert after == before


def test_a_request_above_the_apps_limit_is_refused(client, layout):
    answer = upload(client, "ps1", "ps1.ipynb", b" " * (5 * 2**20))
    assert answer.status_code == 413
    assert gradebook_assignments(layout) == {}


def test_a_name_already_taken_is_refused(client, layout):
    assert upload(client, "ps1", "a.ipynb", SOURCE).status_code == 302
    answer = upload(client, "ps1", "a.ipynb", SOURCE)
    assert answer.status_code == 400
    assert "assignment ps1 already exists in course mlmeca-2025" in answer.get_data(as_text=True)


def test_a_notebook_is_picked_from_the_courses_material(client, layout):
    folder = material_dir(layout) / "week1"
    folder.mkdir(parents=True)
    (folder / "energy.ipynb").write_bytes(SOURCE)
    (material_dir(layout) / "outside.ipynb").symlink_to(demo_source_dir() / "nothing.ipynb")
    assert list_material_notebooks(layout) == ["week1/energy.ipynb"]
    answer = upload(client, "ps2", "", b"", material="week1/energy.ipynb")
    assert answer.status_code == 302
    assert (layout.course_dir / "source" / "ps2" / "energy.ipynb").read_bytes() == SOURCE
    refused = upload(client, "ps3", "", b"", material="../../../etc/passwd")
    assert refused.status_code == 400  # not one of the listed choices


def test_the_due_date_and_policy_can_be_changed(client, layout):
    upload(client, "ps1", "a.ipynb", SOURCE)
    form = {
        "csrf_token": token(client),
        "duedate": "2025-04-01T09:30",
        "timezone": "UTC",
        "late_method": "zero",
    }
    answer = client.post(f"{PAGE}/ps1/schedule", headers=TEACHER, data=form)
    assert answer.status_code == 302
    assert gradebook_assignments(layout) == {"ps1": datetime(2025, 4, 1, 9, 30)}
    assert late_policy(layout, "ps1") == LatePolicy("zero")


@pytest.mark.parametrize(
    ("who", "create", "steps"),
    [
        ("teacher", 200, 302),
        ("grader", 403, 302),
        ("student", 403, 403),
        ("other_teacher", 403, 403),
    ],
)
def test_graders_run_the_steps_teachers_also_create_students_never(client, who, create, steps):
    headers = identity_headers(IDENTITIES[who])
    assert client.get(f"{PAGE}/new", headers=headers).status_code == create
    upload(client, "ps1", "a.ipynb", SOURCE)  # as the teacher
    data = {"csrf_token": token(client)}
    answer = client.post(f"{PAGE}/ps1/generate", headers=headers, data=data)
    assert answer.status_code == steps
    assert client.post(f"{PAGE}/ps1/schedule", headers=headers, data=data).status_code == (
        302 if who == "teacher" else 403
    )
    assert client.get(f"{PAGE}/ps1/progress.json", headers=headers).status_code == (
        200 if steps == 302 else 403
    )


def test_a_step_without_the_csrf_token_is_refused(client):
    upload(client, "ps1", "a.ipynb", SOURCE)
    assert client.post(f"{PAGE}/ps1/generate", headers=TEACHER).status_code == 400
