"""Helpers to exercise the web app: identities for the test header, a live server, bulk data.

Used by the test suite, the browser tests and ``benchmarks/bench_web.py``.
Identities in headers are honoured only by an app created with
``TESTING=True``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session
from werkzeug.serving import make_server

from coursehub.catalog.models.courses import Course, CourseGroup, Membership, Person, Role
from coursehub.web.identity import Identity


def identity_headers(
    identity: Identity | None, header: str = "X-Coursehub-Test-User"
) -> dict[str, str]:
    """Return the request headers that sign ``identity`` in on a test app (none: anonymous)."""
    if identity is None:
        return {}
    return {header: json.dumps(identity.to_session())}


@contextmanager
def live_server(app: Any, host: str = "127.0.0.1", threaded: bool = True) -> Iterator[str]:
    """Serve ``app`` with werkzeug on a free port in a thread; yield its base URL.

    Parameters
    ----------
    app : WSGI application
        Usually a :func:`coursehub.web.app.create_app` app.
    threaded : bool
        One thread per request (werkzeug's ``ThreadedWSGIServer``).
    """
    server = make_server(host, 0, app, threaded=threaded)
    thread = threading.Thread(target=server.serve_forever, name="coursehub-web", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        collect_dropped_connections()


def collect_dropped_connections() -> int:
    """Collect the sockets a stopped development server left behind; return how many.

    werkzeug's development server does not close a connection whose client
    went away mid-response (a browser dropping a font download when it
    leaves the page); the socket is closed when the garbage collector finds
    it, with a ``ResourceWarning`` that would otherwise surface in whichever
    later test runs the collector. Collected here, those warnings about
    sockets are dropped; any other unraisable exception is passed on.
    """
    import gc
    import socket
    import sys

    dropped = 0
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        nonlocal dropped
        if isinstance(unraisable.exc_value, ResourceWarning) and isinstance(
            unraisable.object, socket.socket
        ):
            dropped += 1
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        gc.collect()
    finally:
        sys.unraisablehook = previous
    return dropped


def add_students(session: Session, course: Course, n_students: int, groups: int = 4) -> None:
    """Enrol ``n_students`` generated students (``s0000000``...) in ``course``, spread over groups.

    Bulk inserts, for benchmarks; the groups ``B1``... are created as TD groups.
    """
    names = [f"B{i + 1}" for i in range(groups)]
    for name in names:
        session.add(CourseGroup(course=course, name=name, kind="TD"))
    session.flush()
    group_pks = [g.id for g in course.groups if g.name in names]
    people = [
        {
            "username": f"s{i:07d}",
            "first_name": f"First{i}",
            "last_name": f"Last{i:05d}",
            "email": f"s{i:07d}@etu.example.org",
            "student_number": f"s{i:07d}",
        }
        for i in range(n_students)
    ]
    session.execute(insert(Person), people)
    usernames = [p["username"] for p in people]
    pks = session.scalars(
        select(Person.id).where(Person.username.in_(usernames)).order_by(Person.id)
    )
    rows = [
        {
            "person_pk": pk,
            "course_pk": course.id,
            "role": Role.STUDENT.value,
            "group_pk": group_pks[i % len(group_pks)] if group_pks else None,
        }
        for i, pk in enumerate(pks)
    ]
    session.execute(insert(Membership), rows)
    session.flush()


#: The people of :func:`seed_web_catalog`, by their part in the authorisation tests.
IDENTITIES: dict[str, Identity | None] = {
    "anonymous": None,
    "student": Identity("p2500001"),
    "other_student": Identity("p2509001"),
    "other_teacher": Identity("oteacher", groups=("teachers",)),
    "teacher": Identity("tdupont", groups=("teachers",)),
    "lead": Identity("mbuffat", groups=("teachers",)),
    "grader": Identity("gmartin"),
    "admin": Identity("root", admin=True),
}


def seed_web_catalog(url: str) -> str:
    """Fill a migrated, empty catalog for web tests; return the demo course's ``course_id``.

    The demo course (:func:`coursehub.catalog.seed.seed_demo`: lead
    ``mbuffat``, teacher ``tdupont``, grader ``gmartin``, students
    ``p2500001``-``p2500004``), plus course ``OTHER`` in portal ``INFO`` led
    by ``oteacher``, with student ``p2509001`` (Inès Garnier).
    """
    from coursehub.catalog.courses import create_course, create_portal, get_year
    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.catalog.members import add_member
    from coursehub.catalog.seed import seed_demo

    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = seed_demo(session)
            info = create_portal(session, "INFO", "Informatique")
            other = create_course(
                session, "OTHER", "Another course", get_year(session, "2025-2026"), info
            )
            add_member(session, other, "oteacher", Role.LEAD)
            add_member(
                session,
                other,
                "p2509001",
                Role.STUDENT,
                first_name="Inès",
                last_name="Garnier",
                email="ines.garnier@etu.example.org",
                student_number="p2509001",
            )
            return course.course_id
    finally:
        engine.dispose()


def make_test_app(url: str, **overrides: Any) -> Any:
    """Return a ``TESTING`` app on ``url`` (no hub variables), API tokens ``tok-<part>``."""
    from coursehub.web.app import create_app

    tokens = {f"tok-{part}": who for part, who in IDENTITIES.items() if who is not None}
    config = {
        "TESTING": True,
        "DATABASE_URL": url,
        "SECRET_KEY": "test-secret",
        "API_TOKEN_RESOLVER": tokens.get,
        **overrides,
    }
    return create_app(config, environ={})


def api_headers(part: str) -> dict[str, str]:
    """Return the Authorization header of the test token of ``part`` (none: anonymous)."""
    return {} if IDENTITIES[part] is None else {"Authorization": f"token tok-{part}"}


def dispose_app(app: Any) -> None:
    """Close the database connections of a test app."""
    from coursehub.web.database import ENGINE_KEY

    app.extensions[ENGINE_KEY].dispose()


def rebind_app(app: Any, url: str, built: dict[str, Any]) -> None:
    """Point a test app at another catalog database, as if it had just been created on it.

    Creating an app compiles every URL rule and, on first use, every template:
    about 0.1 s, most of a one-request test. A test that asks the same app a
    thousand questions, each on a fresh database, builds it once and rebinds
    it before each question.

    Parameters
    ----------
    app : flask.Flask
        A :func:`make_test_app` app; its engine is disposed of.
    url : str
        SQLAlchemy URL of the database it then serves (its schema is not checked).
    built : dict
        ``dict(app.extensions)`` taken right after the app was created: whatever
        a request added since (the material update threads it tracks) is forgotten.
    """
    from coursehub.catalog.db import make_engine, session_factory
    from coursehub.web.database import ENGINE_KEY, SESSIONS_KEY

    dispose_app(app)
    engine = make_engine(url)
    app.extensions.clear()
    app.extensions.update(built)
    app.extensions[ENGINE_KEY] = engine
    app.extensions[SESSIONS_KEY] = session_factory(engine)
    app.config["DATABASE_URL"] = url
