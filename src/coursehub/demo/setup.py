"""What a demo start prepares: secrets, catalog, proxy, spawn limit, hub configuration.

Split from :mod:`coursehub.demo.hub` (which re-exports these names).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from coursehub.atomicfile import write_atomically
from coursehub.demo.ports import DemoPorts, pick_ports
from coursehub.errors import UsageError

if TYPE_CHECKING:
    from coursehub.grading.formgrader.account import FormgraderAccount
    from coursehub.grading.layout import CourseLayout


@dataclass(frozen=True)
class DemoSecrets:
    """The shared demo password and the course app's hub API token."""

    password: str
    service_token: str


def load_secrets(data_dir: Path) -> DemoSecrets:
    """Return the data directory's secrets, creating them (mode 0600) on first use."""
    path = data_dir / "demo-secrets.json"
    if path.exists():
        data = json.loads(path.read_text())
        return DemoSecrets(data["password"], data["service_token"])
    made = DemoSecrets(secrets.token_urlsafe(9), secrets.token_hex(32))
    document = {"password": made.password, "service_token": made.service_token}
    write_atomically(path, json.dumps(document), mode=0o600)
    return made


def find_proxy() -> str:
    """Return configurable-http-proxy: ``$COURSEHUB_CHP``, ``<venv>/node`` (make setup), PATH.

    Raises
    ------
    UsageError
        If it is nowhere; the message gives the install command.
    """
    import shutil

    candidates = [
        os.environ.get("COURSEHUB_CHP", ""),
        str(Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"),
        shutil.which("configurable-http-proxy") or "",
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise UsageError(
        "configurable-http-proxy not found: run `make setup` (npm install --prefix "
        ".venv/node configurable-http-proxy@5) or set COURSEHUB_CHP"
    )


def prepare_catalog(data_dir: Path) -> tuple[str, bool]:
    """Migrate the catalog and seed it on first start; return ``(database_url, seeded_now)``.

    Seeding also sets the first course up for nbgrader under ``data_dir/nbgrader``
    and releases its demo assignment. Every start puts the administrator and
    the portal manager in the catalog (:func:`coursehub.demo.seed.ensure_staff`)
    and makes the demo year current if no year is
    (:func:`coursehub.demo.seed.ensure_current_year`), so that a data directory
    seeded by an older version gets them too.
    """
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import database_url, session_scope
    from coursehub.catalog.schema import upgrade_database
    from coursehub.demo.seed import ensure_current_year, ensure_staff, is_seeded, seed_catalog
    from coursehub.grading.demo import setup_demo_grading

    url = database_url({"COURSEHUB_DATA_DIR": str(data_dir)})  # the data directory's SQLite file
    with open_catalog(url, check_schema=False) as engine:  # created here: migrated, not checked
        upgrade_database(engine)
        with session_scope(engine) as session:
            if is_seeded(session):
                ensure_staff(session)
                ensure_current_year(session)
                return url, False
            course_ids = seed_catalog(session)
            ensure_staff(session)
            ensure_current_year(session)
            setup_demo_grading(
                session,
                course_ids[0],
                data_dir / "nbgrader" / "courses",
                data_dir / "nbgrader" / "exchange",
                data_dir / "nbgrader" / "jupyter",
            )
        from coursehub.demo.book import start_demo_book

        start_demo_book(data_dir, course_ids[0])  # in the background (docs/books.md)
        return url, True


def demo_spawn_limit(override: str | None = None) -> int:
    """Return the demo's ``concurrent_spawn_limit``: ``override``, else this machine's rule.

    The rule is :func:`coursehub.hub.render.plan_spawn_limit` of the CPUs this
    process may use (:func:`coursehub.resources.cpus.effective_cpus`), as the
    demo's servers run here.

    Raises
    ------
    UsageError
        If ``override`` (``$COURSEHUB_SPAWN_LIMIT``) is not a positive integer.
    """
    from coursehub.hub.render import plan_spawn_limit
    from coursehub.resources.cpus import effective_cpus

    if override is None or override == "":
        return plan_spawn_limit(effective_cpus())
    if not override.isdigit() or int(override) < 1:
        raise UsageError(f"COURSEHUB_SPAWN_LIMIT must be a positive integer, got {override!r}")
    return int(override)


def demo_exam_environment(data_dir: Path, service_port: int) -> dict[str, str]:
    """Return the hub environment that turns exam servers on in a demo (docs/exams.md).

    ``COURSEHUB_EXAM_URL``: the course app at ``127.0.0.1:service_port`` (its
    ``/services/coursehub/`` root); exam homes under ``data_dir/exams``; the
    released notebooks from the demo's exchange, ``data_dir/nbgrader/exchange``.
    """
    return {
        "COURSEHUB_EXAM_URL": f"http://127.0.0.1:{service_port}/services/coursehub/",
        "COURSEHUB_EXAM_ROOT": str(data_dir / "exams"),
        "COURSEHUB_GRADING_EXCHANGE": str(data_dir / "nbgrader" / "exchange"),
    }


def grading_layouts(data_dir: Path) -> list[CourseLayout]:
    """Return the layouts of the demo's courses set up for grading (with ``nbgrader_config.py``)."""
    from coursehub.grading.layout import make_layout

    root = data_dir / "nbgrader" / "courses"
    found = sorted(p.parent.name for p in root.glob("*/nbgrader_config.py"))
    return [
        make_layout(c, root, data_dir / "nbgrader" / "exchange", single_user=True) for c in found
    ]


def formgrader_names(database_url: str, course_ids: Sequence[str]) -> dict[str, str]:
    """Return ``course_id -> "Grading: <course title>"`` for the Services menu.

    A course_id the catalog does not know keeps its id in the name.
    """
    from sqlalchemy import select

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.models.courses import Course

    if not course_ids:
        return {}
    with open_catalog(database_url) as engine, session_scope(engine) as session:
        rows = session.execute(
            select(Course.course_id, Course.title).where(Course.course_id.in_(course_ids))
        ).all()
    titles = {course_id: title for course_id, title in rows}
    return {c: f"Grading: {titles.get(c, c)}" for c in course_ids}


def render_demo_config(
    data_dir: Path,
    port: int,
    ip: str,
    database_url: str,
    spawn_limit: int,
    formgraders: Sequence[CourseLayout] = (),
    ports: DemoPorts | None = None,
    service_names: Mapping[str, str] | None = None,
    kind: str = "local",
    accounts: Mapping[str, FormgraderAccount] | None = None,
) -> str:
    """Return the demo hub's ``jupyterhub_config.py``.

    ``kind`` is the spawner: ``local`` (a process in a cgroup per server) or
    ``slurm`` (a Slurm job per server on this host's cluster, which the
    servers call back at the hub's port, :mod:`coursehub.demo.slurm`).

    ``ports`` gives the hub, proxy API, app and formgrader ports (default:
    :func:`coursehub.demo.ports.pick_ports`). Each course of ``formgraders``
    gets its formgrader as a hub service named after it
    (:func:`coursehub.grading.formgrader.service.render_formgrader_config`, token
    from ``FORMGRADER_TOKEN_<COURSE_ID>``), reached by its team group, and
    shown in the Services menu by its name in ``service_names`` (course_id ->
    name, :func:`formgrader_names`; default: the course_id), and runs as its
    own account where ``accounts`` has it (:func:`prepare_formgraders`). The demo's
    administrator is a hub admin; the portal manager, in no course, is
    created by the hub at start.
    """
    from coursehub.demo.seed import DEMO_ADMIN, DEMO_MANAGER
    from coursehub.grading.formgrader.service import full_server_enabled, render_formgrader_config
    from coursehub.hub.render import HubSettings, render_hub_config, render_service_names

    ports = ports or pick_ports(ip, port, len(formgraders))
    settings = replace(
        HubSettings(),
        kind=kind,
        demo=True,
        data_dir=str(data_dir),
        bind_url=f"http://{ip}:{port}",
        hub_bind_url=f"http://127.0.0.1:{ports.hub}",
        # slurm: the jobs run on this host (the single-node cluster)
        hub_connect_url=f"http://127.0.0.1:{ports.hub}",
        proxy_api_url=f"http://127.0.0.1:{ports.proxy_api}",
        proxy_command=(find_proxy(),),
        service_url=f"http://127.0.0.1:{ports.service}",
        service_command=(sys.executable, "-m", "coursehub", "web", "serve"),
        database_url=database_url,
        concurrent_spawn_limit=spawn_limit,
        formgrader_courses=tuple(layout.course_id for layout in formgraders),
        admin_users=(DEMO_ADMIN[0],),
        allowed_users=(DEMO_ADMIN[0], DEMO_MANAGER[0]),
    )
    text = render_hub_config(settings)
    if formgraders:
        text += "\n" + render_formgrader_config(
            formgraders,
            python=sys.executable,
            ports=list(ports.formgraders),
            allow_root=os.geteuid() == 0,
            full_server=full_server_enabled(),
            accounts=accounts,
        )
        text += "\n" + render_service_names(service_names or {})
    return text
