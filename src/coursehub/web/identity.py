"""Who is making a request: a small value independent of how it was learnt.

An :class:`Identity` comes from the hub (OAuth login or an API token), from
the explicit development user, or, in tests only, from a header. What the
identity may do in a course is decided from the catalog, not from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Identity:
    """A signed-in user.

    Attributes
    ----------
    name : str
        Hub user name (lower case, as the hub's authenticator normalises it).
    admin : bool
        Hub admin: may do everything in the course app.
    groups : tuple of str
        The user's hub groups (``teachers`` lets a user create courses).
    """

    name: str
    admin: bool = False
    groups: tuple[str, ...] = field(default=())

    def to_session(self) -> dict[str, Any]:
        """Return a JSON-able dict to keep in the Flask session."""
        return {"name": self.name, "admin": self.admin, "groups": list(self.groups)}

    @classmethod
    def from_session(cls, data: Mapping[str, Any]) -> Identity:
        """Rebuild an identity stored by :meth:`to_session`."""
        return cls(str(data["name"]), bool(data.get("admin")), tuple(data.get("groups") or ()))


def identity_from_hub(model: Mapping[str, Any] | None) -> Identity | None:
    """Return the identity in a hub user model (``GET /hub/api/user``), if any.

    Parameters
    ----------
    model : mapping or None
        What ``HubAuth.user_for_token`` returned: ``name``, ``admin``,
        ``groups``, ``scopes``; a service token has ``kind == "service"``.

    Returns
    -------
    Identity or None
        None for no user or for a service (services are not people).
    """
    if not model or model.get("kind", "user") != "user" or not model.get("name"):
        return None
    return Identity(
        name=str(model["name"]).lower(),
        admin=bool(model.get("admin")),
        groups=tuple(sorted(str(g) for g in model.get("groups") or ())),
    )
