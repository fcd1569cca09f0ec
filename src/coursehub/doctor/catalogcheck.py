"""The catalog: reachable and at the newest migration; the database server's clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from coursehub.doctor.result import CheckResult, fail, ok, skip, warn

#: Reads the database server's clock (``SELECT now()``) on an engine; tests give a far-off one.
ClockReader = Callable[[object], datetime]


def check_catalog(url: str | None = None) -> CheckResult:
    """Open the catalog as every command does; fail when unreachable or a migration is pending.

    Uses :func:`coursehub.catalog.connect.open_catalog` and
    :func:`coursehub.catalog.schema.check_schema`: the line is theirs (the
    database's URL without its password and ``run `coursehub db upgrade```).
    """
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.schema import current_revision
    from coursehub.errors import CoursehubError

    try:
        with open_catalog(url) as engine:
            where = engine.url.render_as_string(hide_password=True)
            revision = current_revision(engine)
    except CoursehubError as exc:
        return fail("catalog", str(exc))
    return ok("catalog", f"the catalog database {where} is at the newest revision {revision}")


def read_server_clock(engine: object) -> datetime:
    """Return PostgreSQL's ``now()`` (a timezone-aware datetime) on ``engine``."""
    from sqlalchemy import Engine, text

    assert isinstance(engine, Engine)
    with engine.connect() as connection:
        value = connection.execute(text("SELECT now()")).scalar_one()
    assert isinstance(value, datetime)
    return value


def check_clock(
    url: str | None = None,
    limit_s: float = 5.0,
    read_clock: ClockReader = read_server_clock,
    now: Callable[[], float] = time.time,
) -> CheckResult:
    """Compare this host's clock with the PostgreSQL server's (``SELECT now()``).

    The server's time is compared with the middle of the query's round trip.
    A skew above ``limit_s`` seconds warns: the catalog's timestamps (last
    sync, deadlines) and LTI launches' tokens (``iat``/``exp``) disagree with
    the hosts' clocks; the fix is NTP (``timedatectl set-ntp true``) on both.
    Skipped for SQLite (no server clock) and when the catalog is unreachable
    (the catalog check says why).
    """
    from sqlalchemy.exc import SQLAlchemyError

    from coursehub.catalog.db import make_engine

    engine = make_engine(url)
    try:
        if engine.dialect.name != "postgresql":
            return skip("clock", f"the catalog is {engine.dialect.name}: no database server clock")
        where = engine.url.render_as_string(hide_password=True)
        try:
            before = now()
            server = read_clock(engine)
            after = now()
        except SQLAlchemyError:
            return skip("clock", f"the catalog database {where} is unreachable (see catalog)")
    finally:
        engine.dispose()
    skew = server.timestamp() - (before + after) / 2
    line = f"this host's clock is {abs(skew):.1f} s {'behind' if skew > 0 else 'ahead of'} {where}"
    if abs(skew) > limit_s:
        return warn("clock", f"{line} (above {limit_s:g} s): turn on NTP on both hosts")
    return ok("clock", line)
