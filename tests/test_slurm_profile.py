"""A course profile's Slurm placement: validated once, carried as JSON, applied by the spawner."""

from __future__ import annotations

import pytest

from coursehub.contract import (
    ProfileError,
    make_profile,
    profile_from_json,
    profile_to_json,
    slurm_env,
)
from coursehub.runner.slurm.plan import SlurmPlacement
from coursehub.spawn.profiles import spawner_override


def test_a_gpu_course_profile_names_its_partition_account_and_qos():
    profile = make_profile("gpu-lstm", 2, "4G", gpus=1, partition="gpu", account="phys101", qos=" ")
    assert (profile.partition, profile.account, profile.qos) == ("gpu", "phys101", None)
    assert profile.describe() == "2 CPU, 4G, 2 threads, 1 GPU, partition gpu, account phys101"


@pytest.mark.parametrize(
    ("field", "value"),
    [("partition", "gpu;rm -rf ~"), ("account", "a b"), ("qos", "-x"), ("partition", 7)],
)
def test_a_profile_with_a_bad_slurm_name_is_refused_naming_the_profile_and_field(field, value):
    with pytest.raises(ProfileError, match=f"profile 'p': {field} "):
        make_profile("p", 1, "1G", **{field: value})


def test_slurm_fields_survive_json_and_a_profile_without_them_reads_as_before():
    profile = make_profile("gpu", 2, "4G", partition="gpu", qos="course")
    data = profile_to_json(profile)
    assert data["partition"] == "gpu" and data["qos"] == "course" and "account" not in data
    assert profile_from_json(data) == profile
    plain = profile_to_json(make_profile("cpu", 1, "1G"))
    assert not {"partition", "account", "qos"} & set(plain)


def test_the_slurm_spawner_and_the_servers_runner_get_the_courses_placement():
    profile = make_profile("gpu", 2, "4G", gpus=1, partition="gpu", account="phys101", qos="course")
    override = spawner_override(profile, "slurm")
    assert override["req_partition"] == "gpu"
    assert override["req_options"] == "--account=phys101 --qos=course"
    assert SlurmPlacement.from_env(override["environment"]) == SlurmPlacement(
        "gpu", "phys101", "course"
    )
    assert slurm_env(make_profile("cpu", 1, "1G")) == {}
    assert "req_partition" not in spawner_override(make_profile("cpu", 1, "1G"), "slurm")


def test_the_catalog_stores_a_profiles_placement_and_clears_it(session):
    from coursehub.catalog import profiles

    profile = profiles.create_profile(
        session, "gpu-lstm", cpu_limit=2, mem_limit="4G", gpus=1, partition="gpu", qos="course"
    )
    assert (profile.partition, profile.account, profile.qos) == ("gpu", None, "course")
    assert profiles.profile_json(profile)["partition"] == "gpu"
    profiles.update_profile(session, profile, partition=None, account="phys101")
    assert (profile.partition, profile.account, profile.qos) == (None, "phys101", "course")
    assert profiles.course_profile(profile).account == "phys101"


def test_the_catalog_refuses_a_bad_partition_naming_the_profile(session):
    from coursehub.catalog import profiles
    from coursehub.catalog.errors import ValidationError

    with pytest.raises(ValidationError, match="profile 'p': partition 'gpu nodes' is not a Slurm"):
        profiles.create_profile(session, "p", cpu_limit=1, mem_limit="1G", partition="gpu nodes")
    assert profiles.list_profiles(session) == []


def profile_form(client, admin, path: str, **fields: str):
    from helpers import csrf_token

    token = csrf_token(client.get(path, headers=admin).get_data(as_text=True))
    data = {"cpu_limit": "2", "mem_limit": "4G", "gpus": "1", "jobs_per_gpu": "1"}
    return client.post(path, data={**data, **fields, "csrf_token": token}, headers=admin)


def test_an_admin_gives_a_profile_a_partition_in_the_web_app(client):
    from coursehub.web.testing import IDENTITIES, identity_headers

    admin = identity_headers(IDENTITIES["admin"])
    created = profile_form(
        client, admin, "/profiles/new", name="gpu-course", partition="gpu", account="phys101"
    )
    assert created.status_code == 302
    listing = client.get("/profiles/", headers=admin).get_data(as_text=True)
    assert "partition gpu, account phys101" in listing
    edit = client.get("/profiles/gpu-course/edit", headers=admin).get_data(as_text=True)
    assert 'value="gpu"' in edit


def test_a_bad_partition_in_the_web_form_is_shown_and_nothing_is_saved(client):
    from coursehub.web.testing import IDENTITIES, identity_headers

    admin = identity_headers(IDENTITIES["admin"])
    answer = profile_form(client, admin, "/profiles/new", name="bad-one", partition="gpu;x")
    assert answer.status_code == 400
    assert "partition &#39;gpu;x&#39; is not a Slurm name" in answer.get_data(as_text=True)
    assert "bad-one" not in client.get("/profiles/", headers=admin).get_data(as_text=True)
