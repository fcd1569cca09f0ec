"""Spawner hooks: profile choice from the user's hub groups, GPU assignment, trait overrides."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from tornado import web

from coursehub.contract import DEFAULT_PROFILE, make_profile
from coursehub.contract import profile_to_json as render_profile
from coursehub.errors import UsageError
from coursehub.spawn.gpustate import GpuAssignments
from coursehub.spawn.spawner import CourseProfiles, chain_hooks
from helpers import local_spawner

GIB = 1024**3
M2 = make_profile("m2", cpu_limit=2, mem_limit="4G", n_threads=2)
BIG = make_profile("big", cpu_limit=4, mem_limit="8G")
GPU = make_profile("gpu", cpu_limit=2, mem_limit="8G", gpus=1, jobs_per_gpu=2)


def make_spawner(name="alice", profiles=(), server=""):
    groups = [(f"nbgrader-{c}", {"profile": render_profile(p)}) for c, p in profiles]
    return local_spawner([*groups, "other"], name=name, server=server)


def hooks(tmp_path, kind="local", gpu_ids=(0, 1), hub_id="hubA", no_course="default"):
    return CourseProfiles(
        kind,
        gpu_ids=gpu_ids,
        state_path=tmp_path / "gpus.json",
        hub_id=hub_id,
        no_course=no_course,
    )


def test_user_in_no_course_gets_the_default_profile(tmp_path):
    spawner = make_spawner()
    hooks(tmp_path).apply(spawner, {})
    assert spawner.cpu_limit == DEFAULT_PROFILE.cpu_limit
    assert spawner.mem_limit == DEFAULT_PROFILE.mem_limit
    assert spawner.environment["OMP_NUM_THREADS"] == "1"


def test_single_course_applies_its_profile_without_a_form(tmp_path):
    spawner = make_spawner(profiles=[("m2", M2)])
    profiles = hooks(tmp_path)
    assert profiles.options_form(spawner) == ""
    profiles.apply(spawner, {})
    assert (spawner.cpu_limit, spawner.mem_limit) == (2.0, 4 * GIB)
    assert spawner.environment["OMP_NUM_THREADS"] == "2"
    assert spawner.environment["MKL_NUM_THREADS"] == "2"


def test_two_courses_offer_a_choice_defaulting_to_the_most_generous(tmp_path):
    spawner = make_spawner(profiles=[("m2", M2), ("big", BIG)])
    profiles = hooks(tmp_path)
    assert 'value="big" selected' in profiles.options_form(spawner)
    profiles.apply(spawner, profiles.options_from_form({}))
    assert spawner.cpu_limit == 4.0
    profiles.apply(spawner, profiles.options_from_form({"course": ["m2"]}))
    assert spawner.cpu_limit == 2.0
    assert spawner.environment["OMP_NUM_THREADS"] == "2"


def test_a_course_that_is_not_the_users_is_never_honoured(tmp_path):
    spawner = make_spawner(profiles=[("m2", M2)])
    hooks(tmp_path).apply(spawner, {"course": "big"})
    assert spawner.cpu_limit == 2.0


def test_admin_environment_is_kept_and_nothing_lingers_between_spawns(tmp_path):
    spawner = make_spawner(profiles=[("m2", M2), ("gpu", GPU)])
    spawner.environment = {"OMP_NUM_THREADS": "3", "SITE": "lyon"}
    profiles = hooks(tmp_path)
    profiles.apply(spawner, {"course": "gpu"})
    assert spawner.environment["CUDA_VISIBLE_DEVICES"] == "0"
    profiles.apply(spawner, {"course": "m2"})
    assert spawner.environment["OMP_NUM_THREADS"] == "3"
    assert spawner.environment["SITE"] == "lyon"
    assert spawner.environment["CUDA_VISIBLE_DEVICES"] == ""
    assert profiles.gpus.read() == {}


def test_gpus_go_to_the_least_loaded_gpu_and_are_released(tmp_path):
    profiles = hooks(tmp_path, gpu_ids=[0, 1])
    spawners = [make_spawner(f"s{i}", profiles=[("gpu", GPU)]) for i in range(4)]
    for spawner in spawners:
        profiles.apply(spawner, {})
    visible = [s.environment["CUDA_VISIBLE_DEVICES"] for s in spawners]
    assert visible == ["0", "1", "0", "1"]
    assert profiles.gpus.loads() == {0: 2, 1: 2}
    with pytest.raises(web.HTTPError) as info:
        profiles.apply(make_spawner("late", profiles=[("gpu", GPU)]), {})
    assert info.value.status_code == 503
    profiles.release(spawners[1])
    assert profiles.gpus.loads() == {0: 2, 1: 1}


def test_gpu_assignment_survives_a_restart(tmp_path):
    spawner = make_spawner("bob", profiles=[("gpu", GPU)])
    hooks(tmp_path, gpu_ids=[0, 1]).apply(make_spawner("ann", profiles=[("gpu", GPU)]), {})
    hooks(tmp_path, gpu_ids=[0, 1]).apply(spawner, {})
    assert spawner.environment["CUDA_VISIBLE_DEVICES"] == "1"
    # a new hook object (a restarted hub) reads the same file and keeps bob on GPU 1
    again = make_spawner("bob", profiles=[("gpu", GPU)])
    hooks(tmp_path, gpu_ids=[0, 1]).apply(again, {})
    assert again.environment["CUDA_VISIBLE_DEVICES"] == "1"
    state = json.loads((tmp_path / "gpus.json").read_text())
    assert state == {"assignments": {"hubA:ann/": [0], "hubA:bob/": [1]}}


def test_two_hubs_sharing_a_gpu_file_keep_their_own_users_apart(tmp_path):
    hub_a, hub_b = hooks(tmp_path, hub_id="hubA"), hooks(tmp_path, hub_id="hubB")
    on_a, on_b = (make_spawner("bob", profiles=[("gpu", GPU)]) for _ in range(2))
    hub_a.apply(on_a, {})
    hub_b.apply(on_b, {})
    assert hub_a.gpus.read() == {"hubA:bob/": [0], "hubB:bob/": [1]}
    hub_b.release(on_b)
    assert hub_a.gpus.read() == {"hubA:bob/": [0]}


def test_an_entry_written_before_hub_ids_is_released_with_its_server(tmp_path):
    (tmp_path / "gpus.json").write_text(json.dumps({"assignments": {"bob/": [0]}}))
    spawner = make_spawner("bob", profiles=[("gpu", GPU)])
    profiles = hooks(tmp_path)
    profiles.apply(spawner, {})
    profiles.release(spawner)
    assert profiles.gpus.read() == {}


@pytest.mark.parametrize(
    ("courses", "form_has"),
    [
        ([], "You are in no course yet; your server starts with the default profile (1 CPU, 2G)"),
        ([("m2", M2)], None),
        ([("m2", M2), ("big", BIG)], 'value="big" selected'),
    ],
    ids=["no-course", "one-course", "two-courses"],
)
def test_the_spawn_page_shows_a_notice_in_no_course_nothing_in_one_a_choice_in_two(
    tmp_path, courses, form_has
):
    form = hooks(tmp_path).options_form(make_spawner(profiles=courses))
    if form_has is None:
        assert form == ""
    else:
        assert form_has in form.replace("&#x27;", "'")
        assert ("no course" in form) == (not courses)


def test_a_user_in_no_course_starts_the_default_profile_after_the_notice(tmp_path):
    spawner = make_spawner()
    profiles = hooks(tmp_path, no_course="default")
    assert "A student asks their teacher to be added to a course's roster" in profiles.options_form(
        spawner
    ).replace("&#x27;", "'")
    profiles.apply(spawner, profiles.options_from_form({}))
    assert spawner.cpu_limit == DEFAULT_PROFILE.cpu_limit


@pytest.mark.parametrize("user_options", [{}, {"course": "m2"}], ids=["form", "api-course"])
def test_a_site_that_refuses_users_in_no_course_says_why_and_starts_nothing(tmp_path, user_options):
    spawner = make_spawner()
    profiles = hooks(tmp_path, no_course="refuse")
    form = profiles.options_form(spawner)
    assert "no server can start for you" in form
    assert "display: none" in form  # the Start button is hidden
    with pytest.raises(web.HTTPError) as info:
        profiles.apply(spawner, user_options)
    assert info.value.status_code == 403
    assert "a teacher asks the course's lead to be added to its team" in info.value.log_message
    enrolled = make_spawner(profiles=[("m2", M2)])
    profiles.apply(enrolled, {})
    assert enrolled.cpu_limit == 2.0


def test_an_unknown_no_course_choice_is_refused_naming_the_choices(tmp_path):
    with pytest.raises(UsageError, match="default"):
        hooks(tmp_path, no_course="maybe")


def test_slurm_and_kubernetes_do_not_assign_gpus_themselves(tmp_path):
    for kind in ("slurm", "kubernetes"):
        spawner = make_spawner(profiles=[("gpu", GPU)])
        hooks(tmp_path, kind=kind, gpu_ids=[]).apply(spawner, {})
        assert spawner.environment["OMP_NUM_THREADS"] == "2"
    assert GpuAssignments(tmp_path / "gpus.json").read() == {}


def test_malformed_group_profile_is_a_server_error_naming_the_group(tmp_path):
    spawner = make_spawner()
    spawner.user.groups.append(
        SimpleNamespace(name="nbgrader-bad", properties={"profile": {"cpu_limit": 1}})
    )
    with pytest.raises(web.HTTPError, match="nbgrader-bad"):
        hooks(tmp_path).apply(spawner, {})


def test_chain_hooks_runs_every_hook_in_order():
    calls = []
    hook = chain_hooks(lambda s: calls.append(("a", s)), None, lambda s: calls.append(("b", s)))
    hook("spawner")
    assert calls == [("a", "spawner"), ("b", "spawner")]
