"""The course web app: Flask pages, a JSON API and JupyterHub sign-in over the catalog.

``create_app(test_config=None)`` (:mod:`coursehub.web.app`) builds the app.
Importing this package imports nothing heavy, so that ``coursehub --help``
(which loads :mod:`coursehub.web.cli`) stays fast; Flask is imported when an
app is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(
    test_config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Flask:
    """Create and configure the course web app; see :func:`coursehub.web.app.create_app`."""
    from coursehub.web.app import create_app as build

    return build(test_config, environ)
