"""The course app in real Chromium: ``serve`` (the app on the seeded web catalog) and ``browser``.

A plugin of the test suite (``pytest_plugins`` in ``tests/conftest.py``),
used by the Chromium tests of the course app's administration pages
(``test_admin_browser.py``, ``test_year_offers_browser.py``), which mark
themselves with :data:`BROWSER_MARKS`. A module's own fixture of the same
name takes precedence.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
#: Headless, and nothing fetched from the network by Chromium itself.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The marks of a module of these tests: integration, skipped without Debian's Chromium.
BROWSER_MARKS = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]


@pytest.fixture
def serve(tmp_path, sqlite_template, monkeypatch) -> Iterator[Callable[..., Any]]:
    """Start the course app on the seeded web catalog (year 2025-2026, courses mlmeca-2025
    in MECA and other-2025 in INFO) as ``user``; yield its base URL."""
    from coursehub.web.app import create_app
    from coursehub.web.testing import dispose_app, live_server, seed_web_catalog

    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    seed_web_catalog(f"sqlite:///{path}")
    apps = []

    def start(user: str, admin: bool = False):
        config = {
            "DATABASE_URL": f"sqlite:///{path}",
            "DEV_USER": user,
            "DEV_ADMIN": admin,
            "SECRET_KEY": "browser-test",
        }
        apps.append(create_app(config, environ={}))
        return live_server(apps[-1])

    yield start
    for app in apps:
        dispose_app(app)


@pytest.fixture
def sync_api() -> Any:
    """Playwright's synchronous API (the test is skipped without Playwright)."""
    return pytest.importorskip("playwright.sync_api")


@pytest.fixture
def browser(sync_api) -> Iterator[Any]:
    """Headless Debian Chromium through Playwright."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
