"""The hub id: what it is hashed from, and one live hub per id on a host."""

from __future__ import annotations

import pytest

from coursehub.contract import hub_id_for_db_url, plan_hub_id, plan_hub_identity
from coursehub.spawn.identity import HubIdentityError, HubLock, check_hub_id


@pytest.mark.parametrize(
    ("db_url", "cwd", "identity"),
    [
        ("sqlite:///jupyterhub.sqlite", "/srv/hub", "sqlite:////srv/hub/jupyterhub.sqlite"),
        ("sqlite:///data/../jupyterhub.sqlite", "/srv/hub", "sqlite:////srv/hub/jupyterhub.sqlite"),
        ("sqlite:////var/lib/hub/j.sqlite", "/elsewhere", "sqlite:////var/lib/hub/j.sqlite"),
        ("postgresql://hub:s3cret@db:5432/hub", "/", "postgresql://hub@db:5432/hub"),
        ("postgresql://hub@db/hub", "/", "postgresql://hub@db/hub"),
    ],
    ids=["relative", "dotdot", "absolute", "password-dropped", "no-password"],
)
def test_the_identity_is_the_absolute_database_without_its_password(db_url, cwd, identity):
    assert plan_hub_identity(db_url, cwd) == identity


def test_hubs_with_other_databases_get_other_ids_and_the_same_database_the_same():
    prod = hub_id_for_db_url("sqlite:////srv/jupyterhub/jupyterhub.sqlite")
    demo = hub_id_for_db_url("sqlite:////tmp/demo/jupyterhub.sqlite")
    assert prod != demo
    assert prod == hub_id_for_db_url("sqlite:///jupyterhub.sqlite", cwd="/srv/jupyterhub")
    assert len(prod) == 10 and check_hub_id(prod) == prod
    assert plan_hub_id("x") == plan_hub_id("x") != plan_hub_id("y")


def test_a_hub_lock_is_taken_once_per_process_and_names_its_holder(tmp_path):
    path = HubLock.acquire("lockhub1", tmp_path)
    assert HubLock.acquire("lockhub1", tmp_path) == path
    assert path.read_text().strip().isdigit()


@pytest.mark.parametrize("bad", ["", "a b", "../up", "é"])
def test_a_malformed_hub_id_is_refused_with_its_value(bad):
    with pytest.raises(HubIdentityError, match="hub id"):
        check_hub_id(bad)
