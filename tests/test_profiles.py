"""Course profiles -> spawner traits, per spawner kind (pure functions)."""

from __future__ import annotations

import pytest

from coursehub.contract import (
    DEFAULT_PROFILE,
    make_profile,
)
from coursehub.contract import profile_from_json as parse_profile
from coursehub.contract import profile_to_json as render_profile
from coursehub.errors import UsageError
from coursehub.resources.threads import N_THREAD_VARS
from coursehub.spawn.profiles import (
    choose_profile,
    parse_options_form,
    plan_choices,
    plan_gpu_assignment,
    render_options_form,
    spawner_override,
)

GIB = 1024**3
M2 = make_profile("m2-2cpu-4g", cpu_limit=2, mem_limit="4G", n_threads=2)
GPU = make_profile("gpu", cpu_limit=4, mem_limit="16G", gpus=1, jobs_per_gpu=4)


def test_make_profile_derives_threads_from_cpu_limit():
    assert make_profile("p", cpu_limit=2.5, mem_limit="1G").n_threads == 2
    assert make_profile("p", cpu_limit=0.5, mem_limit="1G").n_threads == 1


@pytest.mark.parametrize(
    "data, message",
    [
        ({"mem_limit": 1}, "no 'cpu_limit'"),
        ({"cpu_limit": 1}, "no 'mem_limit'"),
        ({"cpu_limit": 0, "mem_limit": 1}, "cpu_limit"),
        ({"cpu_limit": 1, "mem_limit": "lots"}, "memory size"),
        ({"cpu_limit": 1, "mem_limit": 1, "gpus": -1}, "gpus"),
        ([1, 2], "JSON object"),
    ],
)
def test_parse_profile_rejects_bad_objects_naming_where(data, message):
    with pytest.raises(UsageError, match=message) as info:
        parse_profile(data, where="hub group nbgrader-x")
    assert "hub group nbgrader-x" in str(info.value)


def test_render_profile_round_trips():
    assert parse_profile(render_profile(GPU)) == GPU
    assert parse_profile({**render_profile(M2), "mem_limit": "4G"}) == M2


def test_local_override_sets_limits_and_thread_environment():
    override = spawner_override(M2, "local")
    assert override["cpu_limit"] == 2.0
    assert override["mem_limit"] == 4 * GIB
    env = override["environment"]
    assert {env[name] for name in N_THREAD_VARS} == {"2"}
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert set(override) == {"cpu_limit", "mem_limit", "environment", "visible_gpus"}
    assert override["visible_gpus"] == []


def test_local_override_exposes_only_the_assigned_gpu():
    override = spawner_override(GPU, "local", gpu_ids=[3])
    env = override["environment"]
    assert override["visible_gpus"] == [3]
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_systemd_override_without_gpu_isolates_devices():
    override = spawner_override(M2, "systemd")
    assert override["isolate_devices"] is True
    assert override["unit_extra_properties"] == {"MemorySwapMax": "0"}
    assert override["environment"]["OMP_NUM_THREADS"] == "2"


def test_systemd_override_with_gpu_allows_only_that_device():
    override = spawner_override(GPU, "systemd", gpu_ids=[1])
    props = override["unit_extra_properties"]
    assert override["isolate_devices"] is False
    assert props["DevicePolicy"] == "closed"
    assert "/dev/nvidia1 rw" in props["DeviceAllow"]
    assert "/dev/nvidia0 rw" not in props["DeviceAllow"]
    assert "/dev/nvidiactl rw" in props["DeviceAllow"]


def test_systemd_and_local_refuse_a_gpu_profile_without_gpus():
    with pytest.raises(UsageError, match="needs 1 GPU"):
        spawner_override(GPU, "systemd", gpu_ids=[])


def test_slurm_override_requests_cpus_memory_and_gpus():
    override = spawner_override(make_profile("s", 1.5, "1536M", gpus=2), "slurm")
    assert override["req_nprocs"] == "2"
    assert override["req_memory"] == "1536M"
    assert override["req_ngpus"] == "2"
    assert override["req_gres"] == "gpu:2"
    assert override["environment"]["OMP_NUM_THREADS"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in override["environment"]


def test_slurm_override_without_gpu_requests_none():
    override = spawner_override(M2, "slurm")
    assert override["req_ngpus"] == "" and override["req_gres"] == ""
    assert override["req_memory"] == "4096M"


def test_kubernetes_override_uses_extra_resource_limits_for_gpus():
    assert spawner_override(GPU, "kubernetes")["extra_resource_limits"] == {"nvidia.com/gpu": "1"}
    override = spawner_override(M2, "kubernetes")
    assert override["extra_resource_limits"] == {}
    assert override["mem_limit"] == 4 * GIB and override["cpu_limit"] == 2.0


def test_override_keeps_thread_variables_the_admin_set():
    env = spawner_override(M2, "local", keep_env={"OMP_NUM_THREADS": "8"})["environment"]
    assert "OMP_NUM_THREADS" not in env
    assert env["MKL_NUM_THREADS"] == "2"


def test_unknown_kind_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown spawner kind 'docker'"):
        spawner_override(M2, "docker")


def _group(name, profile=None, title=None):
    props = {"coursehub": True}
    if profile is not None:
        props["profile"] = render_profile(profile)
    if title:
        props["title"] = title
    return name, props


def test_plan_choices_lists_own_courses_most_generous_first():
    groups = [
        _group("nbgrader-mlmeca-2025", M2, "Machine Learning for Mechanics"),
        _group("formgrade-gpu-2025", GPU),
        _group("nbgrader-gpu-2025", GPU),
        _group("teachers"),
        _group("nbgrader-noprofile"),
    ]
    choices = plan_choices(groups)
    assert [c.course_id for c in choices] == ["gpu-2025", "mlmeca-2025"]
    assert choices[1].title == "Machine Learning for Mechanics"


def test_choose_profile_defaults_and_refuses_other_courses():
    choices = plan_choices([_group("nbgrader-a", M2), _group("nbgrader-b", GPU)])
    assert choose_profile(choices, None) == GPU
    assert choose_profile(choices, "a") == M2
    assert choose_profile([], None) == DEFAULT_PROFILE
    with pytest.raises(UsageError, match="'c' is not one of your courses"):
        choose_profile(choices, "c")
    with pytest.raises(UsageError):
        choose_profile([], "a")


def test_options_form_only_with_two_choices_and_escaped():
    one = plan_choices([_group("nbgrader-a", M2, "A <b>")])
    assert render_options_form(one) == ""
    two = plan_choices([_group("nbgrader-a", M2, "A <b>"), _group("nbgrader-b", GPU, "B")])
    form = render_options_form(two)
    assert 'name="course"' in form
    assert '<option value="b" selected>' in form
    assert "A &lt;b&gt;" in form and "<b>" not in form
    assert parse_options_form({"course": ["a"]}) == {"course": "a"}
    assert parse_options_form({}) == {}


def test_gpu_assignment_picks_least_loaded_with_room():
    assert plan_gpu_assignment({0: 2, 1: 1}, [0, 1], 1, jobs_per_gpu=4) == [1]
    assert plan_gpu_assignment({}, [0, 1], 2, jobs_per_gpu=1) == [0, 1]
    assert plan_gpu_assignment({0: 4, 1: 3}, [0, 1], 1, jobs_per_gpu=4) == [1]
    assert plan_gpu_assignment({}, [], 0, jobs_per_gpu=1) == []


def test_gpu_assignment_fails_when_no_gpu_has_room():
    with pytest.raises(UsageError, match="no GPU free"):
        plan_gpu_assignment({0: 1, 1: 1}, [0, 1], 1, jobs_per_gpu=1)
    with pytest.raises(UsageError, match="no GPU free"):
        plan_gpu_assignment({}, [], 1, jobs_per_gpu=1)


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("nbgrader-ml-2025", ("students", "ml-2025")),
        ("formgrade-ml-2025", ("team", "ml-2025")),
        ("nbgrader-", None),
        ("formgrade-", None),
        ("coursehub-users", None),
        ("staff", None),
        ("xnbgrader-ml", None),
    ],
)
def test_a_group_name_is_a_course_group_only_with_a_prefix_and_a_course_id(name, parsed):
    from coursehub.contract import course_id_of_group, parse_course_group

    assert parse_course_group(name) == parsed
    assert course_id_of_group(name) == (parsed[1] if parsed else None)


def test_course_group_names_round_trip_and_need_a_course_id():
    from coursehub.contract import parse_course_group, student_group, team_group

    assert parse_course_group(student_group("ml-2025")) == ("students", "ml-2025")
    assert parse_course_group(team_group("ml-2025")) == ("team", "ml-2025")
    with pytest.raises(UsageError, match="needs a course id"):
        team_group("")
