"""Two course apps on one catalog creating the same person at once: a clear answer, never a 500.

The race is made exact, not hoped for: while the first app's request is
between "is there such a person?" (no) and its insert, a second app
instance on the same catalog adds the same person and commits. The first
app then breaks ``people.username``'s unique rule; it runs the change again
once (the person now found) and, losing again, answers 409 naming the
person.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from coursehub.catalog import people
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.errors import ConflictError
from coursehub.catalog.models.courses import Membership, Person
from coursehub.web.testing import (
    IDENTITIES,
    api_headers,
    dispose_app,
    identity_headers,
    make_test_app,
)
from helpers import csrf_token

C = "/courses/mlmeca-2025"
TEACHER = identity_headers(IDENTITIES["teacher"])


@pytest.fixture
def other_app(database_url: str, app: Any) -> Iterator[Any]:
    """A second course app on the same catalog (``app`` seeded it)."""
    second = make_test_app(database_url)
    yield second
    dispose_app(second)


def lose_the_race(
    monkeypatch: pytest.MonkeyPatch, username: str, winner: Callable[[], Any], every_time: bool
) -> list[int]:
    """Make ``find_person(username)`` answer "nobody" after ``winner`` added them (first call only,
    unless ``every_time``: then the loser never sees them); return the winner's statuses."""
    real = people.find_person
    statuses: list[int] = []
    winning = []

    def find_person(session: Any, name: str) -> Person | None:
        found = real(session, name)
        if name != username or winning or (statuses and not every_time):
            return found
        if not statuses:
            winning.append(True)  # the other app, meanwhile: it sees the catalog as it is
            statuses.append(winner().status_code)
            winning.clear()
        return None

    monkeypatch.setattr(people, "find_person", find_person)
    return statuses


def count_people(app: Any, username: str) -> tuple[int, int]:
    from coursehub.web.database import ENGINE_KEY

    with app.extensions[ENGINE_KEY].connect() as connection:
        n_people = connection.scalar(
            select(func.count()).select_from(Person).where(Person.username == username)
        )
        n_members = connection.scalar(
            select(func.count())
            .select_from(Membership)
            .join(Person, Membership.person_pk == Person.id)
            .where(Person.username == username)
        )
    return n_people, n_members


def test_the_api_adding_a_person_another_app_just_added_succeeds_after_one_retry(
    app, other_app, monkeypatch
):
    body = {"username": "racer01"}
    winner = other_app.test_client()
    statuses = lose_the_race(
        monkeypatch,
        "racer01",
        lambda: winner.post(f"/api/v1{C}/members", json=body, headers=api_headers("teacher")),
        every_time=False,
    )
    answer = app.test_client().post(
        f"/api/v1{C}/members", json=body, headers=api_headers("teacher")
    )
    assert statuses == [201]
    assert answer.status_code in (200, 201), answer.get_data(as_text=True)
    assert answer.get_json()["username"] == "racer01"
    assert count_people(app, "racer01") == (1, 1)


def test_the_api_refuses_with_409_naming_the_person_a_change_that_loses_every_time(
    app, other_app, monkeypatch
):
    body = {"username": "racer02"}
    winner = other_app.test_client()
    lose_the_race(
        monkeypatch,
        "racer02",
        lambda: winner.post(f"/api/v1{C}/members", json=body, headers=api_headers("teacher")),
        every_time=True,
    )
    answer = app.test_client().post(
        f"/api/v1{C}/members", json=body, headers=api_headers("teacher")
    )
    assert answer.status_code == 409
    error = answer.get_json()["error"]
    assert error.startswith("adding racer02 to mlmeca-2025: not saved, another request made")
    assert "try again" in error
    assert count_people(app, "racer02") == (1, 1)


def test_the_members_form_adding_a_person_another_app_just_added_succeeds_after_one_retry(
    app, other_app, monkeypatch
):
    loser, winner = app.test_client(), other_app.test_client()
    form = {"username": "racer03", "role": "student", "group": ""}

    def win() -> Any:
        token = csrf_token(winner.get(f"{C}/members", headers=TEACHER).get_data(as_text=True))
        return winner.post(f"{C}/members", data={**form, "csrf_token": token}, headers=TEACHER)

    token = csrf_token(loser.get(f"{C}/members", headers=TEACHER).get_data(as_text=True))
    statuses = lose_the_race(monkeypatch, "racer03", win, every_time=False)
    answer = loser.post(f"{C}/members", data={**form, "csrf_token": token}, headers=TEACHER)
    assert statuses == [302]
    assert answer.status_code == 302, answer.get_data(as_text=True)
    assert count_people(app, "racer03") == (1, 1)


def test_the_members_form_shows_409_naming_the_person_when_it_loses_every_time(
    app, other_app, monkeypatch
):
    loser, winner = app.test_client(), other_app.test_client()
    form = {"username": "racer04", "role": "student", "group": ""}

    def win() -> Any:
        token = csrf_token(winner.get(f"{C}/members", headers=TEACHER).get_data(as_text=True))
        return winner.post(f"{C}/members", data={**form, "csrf_token": token}, headers=TEACHER)

    token = csrf_token(loser.get(f"{C}/members", headers=TEACHER).get_data(as_text=True))
    lose_the_race(monkeypatch, "racer04", win, every_time=True)
    answer = loser.post(f"{C}/members", data={**form, "csrf_token": token}, headers=TEACHER)
    assert answer.status_code == 409
    assert "adding racer04 to mlmeca-2025: not saved" in answer.get_data(as_text=True)


def test_a_change_that_breaks_a_unique_rule_twice_is_refused_after_one_retry(session):
    session.add(Person(username="twin01", first_name="", last_name=""))
    session.commit()
    attempts: list[int] = []

    def add_twin() -> None:
        attempts.append(1)
        session.add(Person(username="twin01", first_name="", last_name=""))

    with pytest.raises(ConflictError, match=r"^adding twin01: not saved, .*\(unique rule"):
        retry_on_conflict(session, add_twin, "adding twin01")
    assert len(attempts) == 2
    assert (
        session.scalar(select(func.count()).select_from(Person).where(Person.username == "twin01"))
        == 1
    )


def test_a_change_that_lost_a_race_once_is_written_by_its_retry(session):
    session.add(Person(username="twin02", first_name="", last_name=""))
    session.commit()
    names = iter(["twin02", "twin03"])

    def add_next() -> str:
        name = next(names)
        session.add(Person(username=name, first_name="", last_name=""))
        return name

    assert retry_on_conflict(session, add_next, "adding a twin") == "twin03"


def test_any_commit_that_breaks_a_unique_rule_is_a_409_conflict_not_a_database_error(session):
    from coursehub.web.saving import committing

    session.add(Person(username="twin04", first_name="", last_name=""))
    session.commit()
    refused = pytest.raises(ConflictError, match=r"^this change: not saved, .*people.username")
    with refused, committing(session):
        session.add(Person(username="twin04", first_name="", last_name=""))


def test_two_lti_launches_of_a_new_person_at_once_both_enrol_them(database_url, monkeypatch):
    from coursehub.web.testing import seed_web_catalog
    from test_lti_web import AUTH, COURSE, INSTRUCTOR, TOKEN, as_, payload

    seed_web_catalog(database_url)
    apps = [
        make_test_app(database_url, LTI_LAUNCH_TOKEN=TOKEN, WTF_CSRF_ENABLED=False)
        for _ in range(2)
    ]
    try:
        loser, winner = (app.test_client() for app in apps)
        # the LMS course's Instructor (the course's lead) launches and gets the link code
        first = loser.post(
            "/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH
        )
        code = first.get_json()["code"]
        linked = loser.post(
            f"{COURSE}/link", data={"code": code, "confirm": "1"}, headers=as_("lead")
        )
        assert linked.status_code == 302
        statuses = lose_the_race(
            monkeypatch,
            "lmsracer",
            lambda: winner.post("/api/v1/lti/launch", json=payload("lmsracer"), headers=AUTH),
            every_time=False,
        )
        answer = loser.post("/api/v1/lti/launch", json=payload("lmsracer"), headers=AUTH)
        assert statuses == [200]
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert answer.get_json()["role"] == "student"
        assert count_people(apps[0], "lmsracer") == (1, 1)
    finally:
        for app in apps:
            dispose_app(app)
