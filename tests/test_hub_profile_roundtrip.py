"""A profile stored in the catalog reaches the spawner unchanged: catalog -> sync plan -> spawner.

The catalog stores it (:mod:`coursehub.catalog.profiles`), the real plan
writes it as hub group properties (:func:`coursehub.hub.sync.course_specs`,
:func:`coursehub.hub.reconcile.desired_from_courses`), and the spawner's
reader (:func:`coursehub.spawn.profiles.plan_choices`) reads it back. Also
through a real hub, where the properties travel as JSON.
"""

import uuid

import pytest

from coursehub.catalog.courses import create_course, create_portal, create_year
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.errors import ValidationError
from coursehub.catalog.profiles import create_profile
from coursehub.catalog.schema import upgrade_database
from coursehub.contract import ProfileError, make_profile, profile_from_json, student_group
from coursehub.hub.hubclient import HubClient
from coursehub.hub.reconcile import desired_from_courses
from coursehub.hub.sync import course_specs, sync_catalog
from coursehub.spawn.profiles import plan_choices

#: (name, cpu_limit, mem_limit, n_threads, gpus, jobs_per_gpu), as an admin types them.
PROFILES = [
    ("half", 0.5, "512M", None, 0, 1),
    ("frac", 2.5, "1.5G", None, 0, 1),
    ("threads", 4, 8 * 1024**3, 2, 0, 1),
    ("gpu", 8, "32G", None, 2, 4),
]


@pytest.fixture
def catalog(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    upgrade_database(engine)
    yield engine
    engine.dispose()


def seed(engine, tag):
    """One course per profile of :data:`PROFILES`; return ``{course_id: profile name}``."""
    courses = {}
    with session_scope(engine) as session:
        year = create_year(session, "2025-2026")
        portal = create_portal(session, "MECA", "Mécanique")
        for name, cpu, mem, threads, gpus, per_gpu in PROFILES:
            profile = create_profile(session, f"{name}{tag}", cpu, mem, threads, gpus, per_gpu)
            course = create_course(session, f"C{name}{tag}", name, year, portal, profile=profile)
            courses[course.course_id] = name
    return courses


def expected(name, tag):
    row = next(p for p in PROFILES if p[0] == name)
    return make_profile(f"{name}{tag}", *row[1:])


def test_the_spawner_reads_back_what_the_catalog_stored_through_the_sync_plan(catalog):
    courses = seed(catalog, "")
    with session_scope(catalog) as session:
        desired = desired_from_courses(course_specs(session))
    for course_id, name in courses.items():
        group = desired.groups[student_group(course_id)]
        [choice] = plan_choices([(group.name, group.properties)])
        assert choice.profile == expected(name, "")


@pytest.mark.parametrize(
    "bad",
    [
        {"cpu_limit": 0},
        {"cpu_limit": float("nan")},
        {"mem_limit": "lots"},
        {"n_threads": 0},
        {"gpus": -1},
        {"jobs_per_gpu": 0},
    ],
)
def test_the_catalog_and_the_spawner_refuse_the_same_profiles_with_the_same_message(catalog, bad):
    values = {"cpu_limit": 1, "mem_limit": "1G", "n_threads": None, "gpus": 0, "jobs_per_gpu": 1}
    values.update(bad)
    with pytest.raises(ProfileError) as at_spawn:
        profile_from_json({"name": "p", **values})
    with session_scope(catalog) as session, pytest.raises(ValidationError) as in_catalog:
        create_profile(session, "p", **values)
    assert str(at_spawn.value).removeprefix("profile: ") == str(in_catalog.value)


@pytest.mark.integration
def test_a_profile_synced_to_a_real_hub_is_read_back_unchanged_by_the_spawner(live_hub, catalog):
    tag = uuid.uuid4().hex[:6]
    courses = seed(catalog, tag)
    client = HubClient(live_hub.api_url, live_hub.token)
    try:
        with session_scope(catalog) as session:
            assert sync_catalog(session, client).ok
        groups = {g["name"]: g for g in client.list_groups()}
        for course_id, name in courses.items():
            group = groups[student_group(course_id)]
            [choice] = plan_choices([(group["name"], group["properties"])])
            assert choice.profile == expected(name, tag)
    finally:
        admin = HubClient(live_hub.api_url, live_hub.admin_token)
        for group in admin.list_groups():
            if tag in group["name"]:
                admin.delete_group(group["name"])
