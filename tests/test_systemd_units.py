"""Students' servers under SystemdSpawner: one unit per server, a leftover unit cleared first."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace
from unittest import mock

import pytest

from coursehub.spawn.systemdunits import (
    UNIT_NAME_MAX,
    escape_unit_part,
    plan_unit_clearing,
    server_unit_name,
)

systemdspawner = pytest.importorskip(
    "systemdspawner", reason="jupyterhub-systemdspawner is not installed"
)
from coursehub.spawn import systemdserver  # noqa: E402  (needs systemdspawner)

TEMPLATE = "jupyter-abc123-{USERNAME}-singleuser"


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("course2", "course2"),
        ("mlmeca-2025", "mlmeca:2d2025"),
        ("a b/c:d", "a:20b:2fc:3ad"),
        (".hidden_1", ".hidden_1"),
        ("été", ":c3:a9t:c3:a9"),
    ],
)
def test_a_server_name_is_escaped_without_dashes_or_backslashes(text, escaped):
    assert escape_unit_part(text) == escaped
    # the characters of a unit name (systemd.unit(5)), no "-" and no backslash
    assert re.fullmatch(r"[A-Za-z0-9:_.]+", escaped)


def test_the_default_server_keeps_the_templates_name():
    assert server_unit_name(TEMPLATE, "alice", 7, "") == "jupyter-abc123-alice-singleuser"


def test_a_named_server_of_a_second_course_gets_its_own_unit():
    default = server_unit_name(TEMPLATE, "alice", 7, "")
    named = server_unit_name(TEMPLATE, "alice", 7, "mlmeca-2025")
    assert named == "jupyter-abc123-alice-singleuser-mlmeca:2d2025"
    assert named != default
    # a user whose name looks like another's server never meets it
    names = {
        server_unit_name(TEMPLATE, user, 7, server)
        for user, server in [
            ("a", ""),
            ("a", "b"),
            ("a-singleuser-b", ""),
            ("a-b", ""),
            ("a", "b-"),
        ]
    }
    assert len(names) == 5


def test_a_template_may_place_the_server_name_itself():
    template = "jupyter-{USERNAME}@{SERVERNAME}"
    assert server_unit_name(template, "bob", 9, "tp-2") == "jupyter-bob@tp:2d2"


def test_a_very_long_server_name_is_hashed_within_systemds_limit():
    name = server_unit_name(TEMPLATE, "alice", 7, "x" * 300)
    assert len(name) + len(".service") <= UNIT_NAME_MAX
    assert name != server_unit_name(TEMPLATE, "alice", 7, "x" * 299)


@pytest.mark.parametrize(
    ("state", "calls"),
    [
        ("failed", [["reset-failed", "u"]]),
        ("deactivating", [["stop", "u"], ["reset-failed", "u"]]),
        ("active", [["stop", "u"], ["reset-failed", "u"]]),
        ("inactive", []),
        ("", []),
    ],
)
def test_a_leftover_unit_is_cleared_before_a_start(state, calls):
    assert plan_unit_clearing("u", state) == calls


def _spawner(server_name: str = "") -> systemdserver.CoursehubSystemdSpawner:
    user = SimpleNamespace(name="alice", id=7, url="/user/alice/", groups=[], escaped_name="alice")
    hub = SimpleNamespace(
        api_url="http://127.0.0.1:8081/hub/api", base_url="/hub/", url="", public_host=""
    )
    with mock.patch.object(systemdspawner.systemd, "get_systemd_version", return_value=252):
        return systemdserver.CoursehubSystemdSpawner(
            user=user,
            hub=hub,
            orm_spawner=SimpleNamespace(name=server_name, server=None),  # as User gives it
            unit_name_template=TEMPLATE,
        )


def test_the_spawner_names_a_named_servers_unit_apart():
    assert _spawner().unit_name == "jupyter-abc123-alice-singleuser"
    assert _spawner("course2").unit_name == "jupyter-abc123-alice-singleuser-course2"


def test_a_saved_unit_name_wins_over_the_template():
    spawner = _spawner("course2")
    spawner.load_state({"unit_name": "jupyter-old-name"})
    assert spawner.unit_name == "jupyter-old-name"  # a server started before is found again


def test_the_spawner_resets_a_failed_unit_before_it_starts(monkeypatch):
    calls: list[tuple[str, ...]] = []

    async def systemctl(*args: str) -> tuple[int, str]:
        calls.append(args)
        return (0, "failed") if args[0] == "show" else (0, "")

    monkeypatch.setattr(systemdserver, "systemctl", systemctl)
    spawner = _spawner()
    asyncio.run(spawner.clear_unit())
    assert calls == [
        ("show", "--property=ActiveState", "--value", "jupyter-abc123-alice-singleuser"),
        ("reset-failed", "jupyter-abc123-alice-singleuser"),
    ]
