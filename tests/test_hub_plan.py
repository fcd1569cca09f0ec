"""Pure parts of the hub sync: plan_sync, desired state, statuses, plan text, client settings."""

import pytest

from coursehub.contract import MANAGED_USERS_GROUP
from coursehub.errors import UsageError
from coursehub.hub.cli import render_plan, render_report
from coursehub.hub.hubclient import client_from_env, normalize_api_url
from coursehub.hub.reconcile import (
    MANAGED_USERS_PROPERTIES,
    CourseSpec,
    HubGroup,
    HubState,
    MemberChange,
    PropertyChange,
    SyncPlan,
    SyncReport,
    desired_from_courses,
    plan_sync,
    render_course_errors,
)

PROPS = {"coursehub": True, "course_id": "c1", "role": "students", "year": "2025-2026"}


def state(users=(), admins=(), **groups):
    """A HubState; each group is ``name=(users, properties)``."""
    return HubState(
        users=frozenset(users),
        admins=frozenset(admins),
        groups={
            n.replace("_", "-"): HubGroup(n.replace("_", "-"), frozenset(u), p)
            for n, (u, p) in groups.items()
        },
    )


CASES = {
    "create everything": (
        state(["a", "b"], nbgrader_c1=(["a", "b"], PROPS)),
        state(),
        False,
        SyncPlan(
            create_users=("a", "b"),
            create_groups=("nbgrader-c1",),
            set_properties=(PropertyChange("nbgrader-c1", PROPS),),
            add_members=(MemberChange("nbgrader-c1", ("a", "b")),),
        ),
    ),
    "nothing to do": (
        state(["a"], nbgrader_c1=(["a"], PROPS)),
        state(["a", "admin"], ["admin"], nbgrader_c1=(["a"], PROPS)),
        False,
        SyncPlan(),
    ),
    "membership add and remove": (
        state(["a", "b"], nbgrader_c1=(["a", "b"], PROPS)),
        state(["a", "b", "c"], nbgrader_c1=(["a", "c"], PROPS)),
        False,
        SyncPlan(
            add_members=(MemberChange("nbgrader-c1", ("b",)),),
            remove_members=(MemberChange("nbgrader-c1", ("c",)),),
        ),
    ),
    "property change": (
        state(["a"], nbgrader_c1=(["a"], {**PROPS, "title": "New"})),
        state(["a"], nbgrader_c1=(["a"], {**PROPS, "title": "Old"})),
        False,
        SyncPlan(set_properties=(PropertyChange("nbgrader-c1", {**PROPS, "title": "New"}),)),
    ),
    "prune off keeps leavers": (
        state(["a"], nbgrader_c1=(["a"], PROPS)),
        state(
            ["a", "gone"],
            nbgrader_c1=(["a"], PROPS),
            nbgrader_old=(["gone"], PROPS),
            coursehub_users=(["a", "gone"], MANAGED_USERS_PROPERTIES),
        ),
        False,
        SyncPlan(),
    ),
    "prune on deletes managed leavers only": (
        state(["a"], nbgrader_c1=(["a"], PROPS)),
        state(
            ["a", "gone", "boss", "local"],
            ["boss"],
            nbgrader_c1=(["a"], PROPS),
            nbgrader_old=(["gone"], PROPS),
            other=(["local"], {}),
            coursehub_users=(["a", "gone", "boss"], MANAGED_USERS_PROPERTIES),
        ),
        True,
        SyncPlan(delete_groups=("nbgrader-old",), delete_users=("gone",)),
    ),
    "unmanaged group: adopted, nobody removed": (
        state(["a"], nbgrader_c1=(["a"], PROPS)),
        state(["a", "x"], nbgrader_c1=(["x"], {"mine": 1})),
        True,
        SyncPlan(
            set_properties=(PropertyChange("nbgrader-c1", PROPS),),
            add_members=(MemberChange("nbgrader-c1", ("a",)),),
        ),
    ),
    "unmanaged groups elsewhere untouched": (
        state(["a"]),
        state(["a", "x"], staff=(["x"], {}), extra=(["a"], {"coursehub": "yes"})),
        True,
        SyncPlan(),
    ),
}


@pytest.mark.parametrize("desired, actual, prune, expected", CASES.values(), ids=list(CASES))
def test_plan_sync(desired, actual, prune, expected):
    assert plan_sync(desired, actual, prune=prune) == expected


def test_plan_then_actual_is_fixed_point():
    desired = state(["a", "b"], nbgrader_c1=(["a"], PROPS), formgrade_c1=(["b"], PROPS))
    assert not plan_sync(desired, state()).is_empty
    assert plan_sync(desired, desired, prune=True).is_empty


def test_managed_users_group_never_loses_members_without_prune():
    desired = state(["a"], coursehub_users=(["a"], MANAGED_USERS_PROPERTIES))
    actual = state(["a", "b"], coursehub_users=(["a", "b"], MANAGED_USERS_PROPERTIES))
    assert plan_sync(desired, actual).remove_members == ()


def test_desired_from_courses_groups_and_properties():
    course = CourseSpec(
        "ml-2025", {"title": "ML", "year": "2025-2026"}, frozenset({"s1", "s2"}), frozenset({"t1"})
    )
    desired = desired_from_courses([course])
    students, team = desired.groups["nbgrader-ml-2025"], desired.groups["formgrade-ml-2025"]
    assert students.users == {"s1", "s2"} and team.users == {"t1"}
    assert students.properties["role"] == "students" and team.properties["role"] == "team"
    assert students.managed and students.properties["course_id"] == "ml-2025"
    assert students.properties["title"] == "ML"
    assert desired.users == {"s1", "s2", "t1"}
    assert desired.groups[MANAGED_USERS_GROUP].users == desired.users


def test_plan_counts():
    plan = SyncPlan(create_users=("a", "b"), add_members=(MemberChange("g", ("a", "b", "c")),))
    assert plan.counts()["create_users"] == 2 and plan.counts()["add_members"] == 3
    assert not plan.is_empty


def test_course_statuses():
    report = SyncReport(errors=(("nbgrader-c1", "No such user: x"), ("bad!", "Invalid username")))
    assert render_course_errors(["c1", "c2"], report) == {
        "c1": "error: nbgrader-c1: No such user: x",
        "c2": "ok",
    }
    aborted = SyncReport(aborted="JupyterHub at http://h is unreachable")
    assert render_course_errors(["c2"], aborted)["c2"].startswith("error: sync interrupted: ")


def test_render_plan_text():
    assert render_plan(SyncPlan(), where="http://h/hub/api").endswith("nothing to do")
    plan = SyncPlan(
        create_users=tuple(f"u{i:02d}" for i in range(12)),
        add_members=(MemberChange("nbgrader-c1", ("u00", "u01")),),
    )
    text = render_plan(plan)
    assert "12 users to create, 2 memberships to add" in text.splitlines()[0]
    assert "u09" in text and "u11" not in text and "and 2 more" in text
    assert "u11" in render_plan(plan, verbose=True)
    assert "nbgrader-c1: +u00, u01" in text


def test_render_report_text():
    assert "applied with 3 requests" in render_report(SyncReport(requests=3))
    text = render_report(SyncReport(errors=(("g", "boom"),), aborted="hub gone"))
    assert "error: g: boom" in text and "stopped: hub gone" in text


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://h:8000", "http://h:8000/hub/api"),
        ("http://h:8000/", "http://h:8000/hub/api"),
        ("https://h/prefix/hub/api/", "https://h/prefix/hub/api"),
    ],
)
def test_normalize_api_url(url, expected):
    assert normalize_api_url(url) == expected


def test_normalize_api_url_rejects_non_http():
    with pytest.raises(UsageError, match="ftp://h"):
        normalize_api_url("ftp://h")


def test_client_from_env_precedence():
    env = {
        "JUPYTERHUB_API_URL": "http://service:8081/hub/api",
        "JUPYTERHUB_API_TOKEN": "t-service",
        "MY_TOKEN": "t-mine",
    }
    client = client_from_env(environ=env)
    assert client.api_url == "http://service:8081/hub/api"
    assert client.session.headers["Authorization"] == "token t-service"
    client = client_from_env("http://other:8000", "MY_TOKEN", environ=env)
    assert client.api_url == "http://other:8000/hub/api"
    assert client.session.headers["Authorization"] == "token t-mine"
    client = client_from_env(environ={**env, "COURSEHUB_HUB_API_URL": "http://c:1"})
    assert client.api_url == "http://c:1/hub/api"


def test_client_from_env_missing_values():
    with pytest.raises(UsageError, match="no hub URL"):
        client_from_env(environ={})
    with pytest.raises(UsageError, match="MY_TOKEN"):
        client_from_env("http://h:8000", "MY_TOKEN", environ={})
