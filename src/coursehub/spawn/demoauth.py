"""The demo's sign-in: one shared password for every account, hub admins included.

JupyterHub's ``SharedPasswordAuthenticator`` (``jupyterhub/authenticators/shared.py``,
JupyterHub >= 5.3) lets the users of ``admin_users`` in only with a separate
``admin_password`` of at least 32 characters, different from ``user_password``.
``coursehub demo`` prints one password for every account, its administrator
included, so its authenticator also accepts ``user_password`` for the admins.
DEMO ONLY: anyone who knows that password can sign in as an administrator.
"""

from __future__ import annotations

from hmac import compare_digest
from typing import Any

from jupyterhub.auth import Authenticator
from jupyterhub.authenticators.shared import SharedPasswordAuthenticator


class DemoPasswordAuthenticator(SharedPasswordAuthenticator):
    """``SharedPasswordAuthenticator`` whose ``user_password`` also signs in ``admin_users``.

    Configured as the parent class (``c.SharedPasswordAuthenticator.user_password``,
    ``c.Authenticator.admin_users``): traitlets applies a parent's section to
    its subclasses.
    """

    async def authenticate(self, handler: Any, data: dict[str, str]) -> dict[str, Any] | None:
        """Return the user model for the shared password, ``admin`` for ``admin_users``."""
        username = self.normalize_username(data["username"])
        password = data["password"]
        if (
            username in self.admin_users
            and self.user_password
            and compare_digest(password, self.user_password)
        ):
            return {"name": username, "admin": True, "groups": []}
        result: dict[str, Any] | None = await super().authenticate(handler, data)
        return result

    def check_allow_config(self) -> None:
        """Check the allow-lists as any authenticator does; say that admins use the password.

        The parent warns that admins cannot sign in without ``admin_password``,
        which is not true here.
        """
        Authenticator.check_allow_config(self)
        if self.admin_users:
            self.log.warning(
                "DEMO: admins %s sign in with the shared password", sorted(self.admin_users)
            )
