"""The plan from the sync's narrow reads equals the plan from the hub's full state.

Property-style (hypothesis) on generated catalogs and hub states: admins,
users outside coursehub, students renamed or removed since the last sync,
groups not managed here, whole-catalog, one-course and pruning syncs. The
hub is :class:`MemoryHub`, an in-memory stand-in answering the five reads of
:class:`~coursehub.hub.hubread.HubReader` from a :class:`HubState`: hundreds
of generated hubs cannot be set up on a real JupyterHub in a test run
(``tests/test_sync_resume.py`` compares both reads on the real hub).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coursehub.contract import MANAGED_USERS_GROUP
from coursehub.hub import hubread
from coursehub.hub.hubread import (
    FEW_LOOKUPS,
    plan_user_reads,
    read_full_hub_state,
    read_hub_state,
    users_to_look_up,
)
from coursehub.hub.reconcile import (
    MANAGED_USERS_PROPERTIES,
    CourseSpec,
    HubGroup,
    HubState,
    desired_from_courses,
    plan_sync,
)


class MemoryHub:
    """The hub's read API over a :class:`HubState`; notes which users each read returned."""

    def __init__(self, state: HubState) -> None:
        self.state = state
        self.user_reads: list[str] = []

    def _user(self, name: str) -> dict[str, Any]:
        return {"name": name, "admin": name in self.state.admins}

    def _group(self, group: HubGroup) -> dict[str, Any]:
        return {"name": group.name, "users": sorted(group.users), "properties": group.properties}

    def list_groups(self) -> list[dict[str, Any]]:
        return [self._group(g) for g in self.state.groups.values()]

    def get_group(self, name: str) -> dict[str, Any] | None:
        group = self.state.groups.get(name)
        return None if group is None else self._group(group)

    def find_user(self, name: str) -> dict[str, Any] | None:
        self.user_reads.append(name)
        return self._user(name) if name in self.state.users else None

    def count_users(self) -> int:
        return len(self.state.users)

    def list_users(self) -> list[dict[str, Any]]:
        self.user_reads.extend(sorted(self.state.users))
        return [self._user(u) for u in sorted(self.state.users)]


NAMES = [f"u{i:02d}" for i in range(60)]
COURSES = ["c1", "c2", "c3"]


@st.composite
def catalogs_and_hubs(draw: st.DrawFn) -> tuple[list[CourseSpec], HubState]:
    """A catalog, and a hub as an earlier sync of another catalog left it, then changed."""
    people = st.frozensets(st.sampled_from(NAMES), max_size=30)

    def courses(ids: list[str], title: str) -> list[CourseSpec]:
        return [
            CourseSpec(
                c, {"title": draw(st.sampled_from([title, "x"]))}, draw(people), draw(people)
            )
            for c in ids
        ]

    catalog = courses(draw(st.lists(st.sampled_from(COURSES), unique=True)), "now")
    earlier = desired_from_courses(
        courses(draw(st.lists(st.sampled_from(COURSES), unique=True)), "then")
    )
    groups = dict(earlier.groups)
    if draw(st.booleans()):  # the managed group lost track of some users
        managed = groups[MANAGED_USERS_GROUP]
        groups[MANAGED_USERS_GROUP] = HubGroup(
            MANAGED_USERS_GROUP, managed.users - draw(people), MANAGED_USERS_PROPERTIES
        )
    if draw(st.booleans()):  # a group made by hand, not managed
        groups["staff"] = HubGroup("staff", draw(people), {"note": "by hand"})
    outside = draw(people)  # users outside coursehub (logged in, made by hand)
    members = {u for g in groups.values() for u in g.users}
    users = frozenset(members | outside)
    admins = (
        frozenset(draw(st.frozensets(st.sampled_from(sorted(users)), max_size=5)))
        if users
        else frozenset()
    )
    return catalog, HubState(users=users, admins=admins, groups=groups)


@settings(max_examples=300, deadline=None)
@given(catalogs_and_hubs(), st.booleans(), st.sampled_from(["catalog", "one course"]))
def test_the_narrow_reads_plan_what_the_full_state_plans(case, prune, scope):
    catalog, hub_state = case
    if scope == "one course":
        prune = False  # a pruning sync covers the whole catalog
        catalog = catalog[:1]
    course_ids = None if scope == "catalog" else [c.course_id for c in catalog]
    desired = desired_from_courses(catalog)
    hub = MemoryHub(hub_state)
    narrow = read_hub_state(hub, desired, course_ids, prune=prune)
    full = read_full_hub_state(MemoryHub(hub_state))
    assert plan_sync(desired, narrow, prune) == plan_sync(desired, full, prune)


def hub_with(users: set[str], managed: set[str], admins: set[str]) -> HubState:
    managed_group = HubGroup(MANAGED_USERS_GROUP, frozenset(managed), MANAGED_USERS_PROPERTIES)
    groups = {MANAGED_USERS_GROUP: managed_group}
    return HubState(frozenset(users), frozenset(admins), groups)


def test_a_no_op_sync_reads_no_user_whatever_the_size_of_the_hub():
    desired = desired_from_courses([CourseSpec("c1", {}, frozenset({"a", "b"}), frozenset())])
    hub_users = {"a", "b"} | {f"x{i}" for i in range(5000)}
    hub = MemoryHub(hub_with(hub_users, {"a", "b"}, {"x1"}))
    hub.state.groups.update(desired.groups)  # the hub as the last sync left it
    state = read_hub_state(hub, desired, prune=True)
    assert plan_sync(desired, state, prune=True).is_empty and hub.user_reads == []


def test_a_pruning_sync_reads_only_the_users_it_may_delete():
    desired = desired_from_courses([CourseSpec("c1", {}, frozenset({"a"}), frozenset())])
    hub = MemoryHub(hub_with({"a", "gone", "boss", "x"}, {"a", "gone", "boss"}, {"boss"}))
    state = read_hub_state(hub, desired, prune=True)
    assert sorted(hub.user_reads) == ["boss", "gone"]
    assert plan_sync(desired, state, prune=True).delete_users == ("gone",)


def test_users_to_look_up_are_new_desired_users_and_managed_users_to_delete():
    desired = desired_from_courses([CourseSpec("c1", {}, frozenset({"a", "new"}), frozenset())])
    groups = {MANAGED_USERS_GROUP: HubGroup(MANAGED_USERS_GROUP, frozenset({"a", "old"}))}
    assert users_to_look_up(desired, groups) == {"new"}
    assert users_to_look_up(desired, groups, prune=True) == {"new", "old"}


@pytest.mark.parametrize(
    ("n_lookups", "n_hub_users", "expected"),
    [
        (0, None, "none"),
        (1, None, "lookup"),
        (FEW_LOOKUPS, None, "lookup"),
        (100, 20000, "lookup"),  # 0.5 s of lookups against 9 s of listing
        (3000, 3000, "list"),  # a first sync: listing is cheaper
        (3000, 200000, "lookup"),
    ],
)
def test_reads_are_one_by_one_or_the_list_whichever_is_cheaper(n_lookups, n_hub_users, expected):
    assert plan_user_reads(n_lookups, n_hub_users) == expected


def test_the_cost_constants_favour_lookups_for_a_few_users():
    assert hubread.LOOKUP_S > hubread.LISTED_USER_S > 0
