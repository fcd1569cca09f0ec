"""Against a real hub: a paced sync stopped half-way converges when run again, and the
narrow reads plan what the full state plans."""

from __future__ import annotations

import threading

import pytest

import test_hub_sync as base
from coursehub.catalog.db import session_scope
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Course
from coursehub.contract import MANAGED_USERS_GROUP
from coursehub.hub.hubclient import HubClient
from coursehub.hub.hubread import read_full_hub_state, read_hub_state
from coursehub.hub.pacing import PacePolicy
from coursehub.hub.reconcile import desired_from_courses, plan_sync
from coursehub.hub.sync import course_specs, sync_catalog

catalog, tag = base.catalog, base.tag  # the fixtures of tests/test_hub_sync.py
seed, course_status = base.seed, base.course_status

#: Four users per request, no pause: many requests to stop between.
SMALL = PacePolicy(target_s=0.25, pause_s=0.0, first_batch=4, max_batch=4)


def run(engine, client, stop=None, progress=None, prune=False):
    with session_scope(engine) as session:
        return sync_catalog(session, client, pace=SMALL, stop=stop, progress=progress, prune=prune)


@pytest.mark.integration
def test_a_stopped_batched_sync_converges_when_run_again(live_hub, catalog, tag):
    course_id = seed(catalog, tag, n_students=30)
    client = HubClient(live_hub.api_url, live_hub.token)
    stop, done = threading.Event(), []

    def progress(items):
        done.append(items)
        if sum(done) >= 12:  # a few batches of users in
            stop.set()

    first = run(catalog, client, stop, progress)
    assert first.report.aborted == "stopped on request" and not first.ok
    assert course_status(catalog, course_id)[0] == "error: sync interrupted: stopped on request"
    hub_users = {u["name"] for u in client.list_users() if tag in u["name"]}
    assert 0 < len(hub_users) < 32  # stopped half-way
    managed = set(client.get_group(MANAGED_USERS_GROUP)["users"])
    assert hub_users <= managed  # every user created is known as coursehub's, even cut short

    second = run(catalog, client)
    assert second.ok and second.plan is not None
    assert not set(second.plan.create_users) & hub_users  # resumed, not redone
    assert run(catalog, client).plan.is_empty
    assert course_status(catalog, course_id)[0] == "ok"
    students = set(client.get_group(f"nbgrader-{course_id}")["users"])
    assert students == {f"s{i}-{tag}" for i in range(30)}


@pytest.mark.integration
def test_the_narrow_reads_plan_what_the_full_hub_plans(live_hub, catalog, tag):
    seed(catalog, tag, n_students=3)
    client = HubClient(live_hub.api_url, live_hub.token)
    admin = HubClient(live_hub.api_url, live_hub.admin_token)
    assert run(catalog, client).ok
    admin.create_users([f"outside-{tag}", f"s9-{tag}"])  # logged in before the catalog knew
    admin.add_group_users(MANAGED_USERS_GROUP, [live_hub.admin_user])  # an admin, managed
    admin.remove_group_users(MANAGED_USERS_GROUP, [f"s2-{tag}"])  # forgotten by the hub
    with session_scope(catalog) as session:
        course = session.query(Course).filter_by(code=f"ML{tag}").one()
        add_member(session, course, f"s9-{tag}", "student")
        add_member(session, course, f"new-{tag}", "student")
    try:
        with session_scope(catalog) as session:
            desired = desired_from_courses(course_specs(session))
        full = read_full_hub_state(client)
        for prune in (False, True):
            narrow = read_hub_state(client, desired, prune=prune)
            assert plan_sync(desired, narrow, prune) == plan_sync(desired, full, prune)
        plan = plan_sync(desired, read_hub_state(client, desired, prune=True), prune=True)
        assert f"new-{tag}" in plan.create_users and f"s9-{tag}" not in plan.create_users
        assert live_hub.admin_user not in plan.delete_users
    finally:
        admin.remove_group_users(MANAGED_USERS_GROUP, [live_hub.admin_user])
