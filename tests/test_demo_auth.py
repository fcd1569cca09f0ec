"""The demo's sign-in: the shared password signs in everyone, the admins as admins."""

from __future__ import annotations

import asyncio

import pytest

from coursehub.spawn.demoauth import DemoPasswordAuthenticator

PASSWORD = "demo-shared-password"


@pytest.fixture
def authenticator():
    return DemoPasswordAuthenticator(user_password=PASSWORD, admin_users={"admin"})


@pytest.mark.parametrize(
    ("username", "password", "expected"),
    [
        ("admin", PASSWORD, {"name": "admin", "admin": True, "groups": []}),
        ("Admin", PASSWORD, {"name": "admin", "admin": True, "groups": []}),
        ("p2501001", PASSWORD, {"name": "p2501001", "admin": False, "groups": []}),
        ("admin", "wrong-password", None),
        ("p2501001", "wrong-password", None),
        ("admin", "", None),
    ],
)
def test_the_shared_password_signs_in_admins_as_admins_and_nothing_else_does(
    authenticator, username, password, expected
):
    data = {"username": username, "password": password}
    assert asyncio.run(authenticator.authenticate(None, data)) == expected


def test_no_password_set_signs_in_nobody():
    authenticator = DemoPasswordAuthenticator(admin_users={"admin"})
    assert (
        asyncio.run(authenticator.authenticate(None, {"username": "admin", "password": ""})) is None
    )
