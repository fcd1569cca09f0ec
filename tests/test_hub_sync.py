"""Catalog -> hub sync: desired state from a real catalog, then sync against a real hub."""

import argparse
import uuid

import pytest

from coursehub.catalog.courses import (
    archive_course,
    create_course,
    create_portal,
    create_year,
    get_course,
)
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Course
from coursehub.catalog.profiles import create_profile
from coursehub.catalog.schema import upgrade_database
from coursehub.contract import MANAGED_USERS_GROUP
from coursehub.errors import CoursehubError
from coursehub.hub import cli as hub_cli
from coursehub.hub.hubclient import HubClient, HubError, HubUnreachableError, RetryPolicy
from coursehub.hub.reconcile import desired_from_courses
from coursehub.hub.sync import READ_FAILED, course_properties, course_specs, sync_catalog

FAST = RetryPolicy(attempts=2, backoff_s=0.01, backoff_max_s=0.05, timeout_s=10)


@pytest.fixture
def catalog(tmp_path):
    """An engine on a fresh, migrated SQLite catalog."""
    engine = make_engine(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    upgrade_database(engine)
    yield engine
    engine.dispose()


def seed(engine, tag, n_students=4):
    """Two courses (one archived) and one course in an inactive year; return the active one's id."""
    with session_scope(engine) as session:
        year = create_year(session, "2025-2026")
        old_year = create_year(session, "2019-2020", is_active=False)
        portal = create_portal(session, "MECA", "Mécanique")
        profile = create_profile(session, "p2", cpu_limit=2, mem_limit="4G", gpus=1, jobs_per_gpu=4)
        course = create_course(
            session, f"ML{tag}", "Machine learning", year, portal, profile=profile
        )
        archived = create_course(session, f"AR{tag}", "Archived", year, portal)
        old = create_course(session, f"OLD{tag}", "Old", old_year, portal)
        add_member(session, course, f"Lead-{tag}", "lead")
        add_member(session, course, f"grader-{tag}", "grader")
        for i in range(n_students):
            add_member(session, course, f"s{i}-{tag}", "student")
        for other in (archived, old):
            add_member(session, other, f"x-{tag}", "student")
        archive_course(session, archived)
        return course.course_id


def test_desired_state_from_catalog(catalog):
    course_id = seed(catalog, "a1", n_students=2)
    with session_scope(catalog) as session:
        desired = desired_from_courses(course_specs(session))
    assert set(desired.groups) == {
        f"nbgrader-{course_id}",
        f"formgrade-{course_id}",
        MANAGED_USERS_GROUP,
    }
    students = desired.groups[f"nbgrader-{course_id}"]
    team = desired.groups[f"formgrade-{course_id}"]
    assert students.users == {"s0-a1", "s1-a1"}
    assert team.users == {"lead-a1", "grader-a1"}  # usernames in lower case
    assert students.properties == {
        "coursehub": True,
        "course_id": course_id,
        "role": "students",
        "year": "2025-2026",
        "portal": "MECA",
        "ue_code": "MLa1",
        "title": "Machine learning",
        "profile": {
            "name": "p2",
            "cpu_limit": 2.0,
            "mem_limit": 4 * 1024**3,
            "n_threads": 2,
            "gpus": 1,
            "jobs_per_gpu": 4,
        },
    }
    assert team.properties["role"] == "team"
    assert "x-a1" not in desired.users


def test_a_courses_home_quota_reaches_its_groups_the_portals_else(catalog):
    course_id = seed(catalog, "q1", n_students=1)
    with session_scope(catalog) as session:
        assert "home_quota" not in course_properties(get_course(session, course_id))
        course = get_course(session, course_id)
        course.portal.home_quota = 2 * 1024**3
        assert course_properties(course)["home_quota"] == 2 * 1024**3
        course.home_quota = 5 * 1024**3
        assert course_properties(course)["home_quota"] == 5 * 1024**3


# --- against a real hub --------------------------------------------------------------


def cleanup(hub, tag):
    """Delete the users and groups a test made (their names contain ``tag``)."""
    client = HubClient(hub.api_url, hub.admin_token)
    for group in client.list_groups():
        if tag in group["name"]:
            client.delete_group(group["name"])
    for user in client.list_users():
        if tag in user["name"]:
            client.delete_user(user["name"])


@pytest.fixture
def tag(live_hub):
    value = uuid.uuid4().hex[:6]
    yield value
    live_hub.ensure_running()
    cleanup(live_hub, value)


def sync(engine, client, prune=False, course_ids=None):
    with session_scope(engine) as session:
        outcome = sync_catalog(session, client, prune=prune, course_ids=course_ids, chunk_size=3)
    return outcome.plan, outcome.report


def course_status(engine, course_id):
    with session_scope(engine) as session:
        course = session.query(Course).filter_by(course_id=course_id).one()
        return course.last_sync_status, course.last_sync_at


@pytest.mark.integration
def test_sync_creates_then_nothing_to_do(live_hub, catalog, tag):
    course_id = seed(catalog, tag)
    client = HubClient(live_hub.api_url, live_hub.token)
    plan, report = sync(catalog, client)
    assert report.ok, report
    assert plan.counts()["create_users"] == 6 and plan.counts()["create_groups"] >= 2
    groups = {g["name"]: g for g in client.list_groups()}
    students = groups[f"nbgrader-{course_id}"]
    assert sorted(students["users"]) == [f"s{i}-{tag}" for i in range(4)]
    assert students["properties"]["profile"]["gpus"] == 1
    assert sorted(groups[f"formgrade-{course_id}"]["users"]) == [f"grader-{tag}", f"lead-{tag}"]
    assert f"x-{tag}" not in {u["name"] for u in client.list_users()}
    status, at = course_status(catalog, course_id)
    assert status == "ok" and at is not None

    again, report = sync(catalog, client)
    assert again.is_empty and report.requests == 0


class StoppingClient(HubClient):
    """A client that stops the hub just before its ``stop_at``-th request."""

    def __init__(self, hub, stop_at):
        super().__init__(hub.api_url, hub.token, retry=FAST)
        self.hub, self.stop_at, self.sent = hub, stop_at, 0

    def send(self, method, path, **kwargs):
        self.sent += 1
        if self.sent == self.stop_at:
            self.hub.stop()
        return super().send(method, path, **kwargs)


@pytest.mark.integration
@pytest.mark.parametrize("stop_at", [7])
def test_sync_interrupted_then_converges(live_hub, catalog, tag, stop_at):
    course_id = seed(catalog, tag, n_students=7)
    stopping = StoppingClient(live_hub, stop_at)
    _plan, report = sync(catalog, stopping)  # request 1 reads the hub
    assert report.aborted is not None and live_hub.api_url in report.aborted
    status, _at = course_status(catalog, course_id)
    assert status.startswith("error: sync interrupted")

    live_hub.start()
    client = HubClient(live_hub.api_url, live_hub.token)
    plan, report = sync(catalog, client)
    assert report.ok and not plan.is_empty
    assert sync(catalog, client)[0].is_empty
    assert course_status(catalog, course_id)[0] == "ok"
    members = {g["name"]: set(g["users"]) for g in client.list_groups()}
    assert members[f"nbgrader-{course_id}"] == {f"s{i}-{tag}" for i in range(7)}


@pytest.mark.integration
def test_prune_deletes_only_what_coursehub_created(live_hub, catalog, tag):
    course_id = seed(catalog, tag, n_students=2)
    client = HubClient(live_hub.api_url, live_hub.token)
    admin = HubClient(live_hub.api_url, live_hub.admin_token)
    admin.create_users([f"local-{tag}"])
    admin.create_group(f"staff-{tag}", [f"local-{tag}"])
    assert sync(catalog, client)[1].ok
    admin.add_group_users(MANAGED_USERS_GROUP, [live_hub.admin_user])
    with session_scope(catalog) as session:
        archive_course(session, session.query(Course).filter_by(course_id=course_id).one())

    kept, _ = sync(catalog, client, prune=False)
    assert kept.delete_users == () and kept.delete_groups == ()
    pruned, report = sync(catalog, client, prune=True)
    assert report.ok
    assert set(pruned.delete_groups) >= {f"nbgrader-{course_id}", f"formgrade-{course_id}"}
    mine = {u for u in pruned.delete_users if tag in u}
    assert mine == {f"s0-{tag}", f"s1-{tag}", f"lead-{tag}", f"grader-{tag}"}
    assert live_hub.admin_user not in pruned.delete_users
    users = {u["name"] for u in client.list_users()}
    assert {f"local-{tag}", live_hub.admin_user} <= users  # not created by coursehub; an admin
    assert not users & set(pruned.delete_users)
    groups = {g["name"]: g["users"] for g in client.list_groups()}
    assert groups[f"staff-{tag}"] == [f"local-{tag}"]
    assert f"nbgrader-{course_id}" not in groups


@pytest.mark.integration
def test_cli_sync_dry_run_apply_and_noop(live_hub, catalog, tag, tmp_path, monkeypatch, capsys):
    course_id = seed(catalog, tag, n_students=2)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", str(catalog.url))
    monkeypatch.setenv("SYNC_TOKEN", live_hub.token)
    monkeypatch.delenv("COURSEHUB_HUB_API_URL", raising=False)
    argv = ["sync", "--hub-url", live_hub.url, "--token-env", "SYNC_TOKEN"]

    assert run([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 users to create" in out and f"nbgrader-{course_id}" in out
    groups = HubClient(live_hub.api_url, live_hub.token).list_groups()
    assert f"nbgrader-{course_id}" not in {g["name"] for g in groups}
    assert run(argv) == 0
    assert "applied with" in capsys.readouterr().out
    assert run(argv) == 0
    assert capsys.readouterr().out.strip().endswith("nothing to do")


def test_cli_unreachable_hub_names_url_and_records_it_on_every_course(catalog, monkeypatch, capsys):
    course_id = seed(catalog, "u1", n_students=1)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", str(catalog.url))
    monkeypatch.setenv("T", "x")
    url = "http://127.0.0.1:9/hub/api"
    assert run(["sync", "--hub-url", url, "--token-env", "T", "--attempts", "1"]) == 1
    out = capsys.readouterr().out
    assert f"stopped: {READ_FAILED}JupyterHub at {url} is unreachable" in out
    status, at = course_status(catalog, course_id)
    assert status.startswith(f"error: sync interrupted: {READ_FAILED}") and at is not None


def run(argv):
    """Parse ``coursehub hub sync <argv>`` with the hub's sync arguments alone; run the sync."""
    parser = argparse.ArgumentParser(prog="coursehub hub sync")
    hub_cli.add_sync_arguments(parser)
    assert argv[0] == "sync"
    return hub_cli.run_sync(parser.parse_args(argv[1:]))


def test_cli_missing_token_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("COURSEHUB_HUB_API_TOKEN", raising=False)
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    with pytest.raises(CoursehubError, match="no hub API token for http://h:1"):
        run(["sync", "--hub-url", "http://h:1"])


class FailingReadClient(HubClient):
    """A client whose reads (GET) fail as ``error`` says; it must then send nothing else."""

    def __init__(self, error):
        super().__init__("http://127.0.0.1:9/hub/api", "t", retry=FAST)
        self.error, self.sent = error, []

    def send(self, method, path, **kwargs):
        self.sent.append((method, path))
        if method == "GET":
            raise self.error
        raise AssertionError(f"{method} {path} sent after a failed read")


@pytest.mark.parametrize(
    "error",
    [
        HubUnreachableError("http://127.0.0.1:9/hub/api", "refused"),
        HubError(503, "proxy restarting", "GET", "/groups"),
        HubError(403, "missing scope read:groups", "GET", "/groups"),
    ],
    ids=["no-answer", "5xx", "4xx"],
)
@pytest.mark.parametrize("course_scope", [False, True], ids=["catalog", "one-course"])
def test_a_failed_hub_read_applies_nothing_and_is_recorded(catalog, error, course_scope):
    course_id = seed(catalog, "f1", n_students=1)
    client = FailingReadClient(error)
    with session_scope(catalog) as session:
        outcome = sync_catalog(session, client, course_ids=[course_id] if course_scope else None)
    assert outcome.read_failed and not outcome.ok and outcome.plan is None
    assert outcome.report.aborted == f"{READ_FAILED}{error}" and outcome.report.requests == 0
    assert all(method == "GET" for method, _ in client.sent)
    assert outcome.statuses == {course_id: f"error: sync interrupted: {READ_FAILED}{error}"}
    assert course_status(catalog, course_id)[0] == outcome.statuses[course_id]


def test_a_dry_run_with_a_failed_read_records_nothing(catalog):
    course_id = seed(catalog, "f2", n_students=1)
    client = FailingReadClient(HubUnreachableError("http://127.0.0.1:9/hub/api", "refused"))
    with session_scope(catalog) as session:
        outcome = sync_catalog(session, client, dry_run=True)
    assert outcome.read_failed and outcome.dry_run and outcome.statuses == {}
    assert course_status(catalog, course_id) == (None, None)


def test_a_pruning_sync_of_named_courses_is_refused(catalog):
    with session_scope(catalog) as session, pytest.raises(CoursehubError, match="whole catalog"):
        sync_catalog(session, FailingReadClient(AssertionError()), course_ids=["x"], prune=True)


@pytest.mark.integration
def test_a_course_sync_reads_and_plans_only_that_course(live_hub, catalog, tag):
    course_id = seed(catalog, tag, n_students=3)
    with session_scope(catalog) as session:
        year = session.query(Course).filter_by(course_id=course_id).one().year
        portal = session.query(Course).filter_by(course_id=course_id).one().portal
        other = create_course(session, f"OT{tag}", "Other", year, portal)
        add_member(session, other, f"o-{tag}", "student")
        other_id = other.course_id
    client = RecordingClient(live_hub)
    plan, report = sync(catalog, client, course_ids=[course_id])
    assert report.ok and plan.create_groups == (f"formgrade-{course_id}", f"nbgrader-{course_id}")
    assert all(other_id not in path for _, path in client.sent)
    reads = sorted(p for m, p in client.sent if m == "GET" and not p.startswith("/users/"))
    assert reads == sorted(
        [
            "/groups/" + MANAGED_USERS_GROUP,
            f"/groups/formgrade-{course_id}",
            f"/groups/nbgrader-{course_id}",
        ]
    )
    assert course_status(catalog, other_id) == (None, None)
    assert course_status(catalog, course_id)[0] == "ok"

    client.sent.clear()
    again, report = sync(catalog, client, course_ids=[course_id])
    assert again.is_empty and report.requests == 0 and len(client.sent) == 3
    whole, report = sync(catalog, client)  # the other course, and nothing of the first again
    assert report.ok and whole.create_groups == (f"formgrade-{other_id}", f"nbgrader-{other_id}")
    assert whole.create_users == (f"o-{tag}",)


class RecordingClient(HubClient):
    """A client that notes each request it sends as ``(method, path)``."""

    def __init__(self, hub):
        super().__init__(hub.api_url, hub.token, retry=FAST)
        self.sent = []

    def send(self, method, path, **kwargs):
        self.sent.append((method, path))
        return super().send(method, path, **kwargs)
