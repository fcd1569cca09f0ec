"""Servers holding a GPU with no kernel busy: the Usage page's list.

Two sources, each the one that knows:

* **Holding a GPU**: the usage records of the hub's sampler
  (:mod:`coursehub.meter.sampler`) in ``usage_units``: a server unit still
  open, sampled within :data:`coursehub.usage.metrics.STALE_S`, with
  GPU-seconds or GPU memory (GPU-seconds grow from the first sample on for
  every server given a GPU).
* **No kernel busy**: the hub's ``last_activity`` of that server (JupyterHub
  REST API, ``GET /users/{name}``, ``servers[name].last_activity``). The
  busy-kernel extension (:mod:`coursehub.spawn.busyactivity`) refreshes the
  server's activity every 60 s while one of its kernels is busy or a runner
  job of it runs, and the single-user server reports its activity to the hub
  every ``JUPYTERHUB_ACTIVITY_INTERVAL`` = 300 s (JupyterHub
  ``jupyterhub/singleuser/extension.py``). A server whose hub activity is older
  than :data:`IDLE_AFTER_S` therefore has no busy kernel and no running job,
  and nobody used it in that time either: it is the same clock the idle
  culler stops servers on, so the list shows what the culler will free next.
  A kernel idle while a browser tab keeps the server active is not listed
  (the list never names a server that is computing).

The kernels' own states are not read: they live in each student's server,
which the course app does not reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from coursehub.catalog.models.usage import UsageUnit
from coursehub.usage.metrics import STALE_S

#: Seconds without hub activity after which a server has no busy kernel: two
#: activity reports of the single-user server (2 x 300 s), so that one late
#: report never lists a busy server.
IDLE_AFTER_S = 600.0


class GpuUnit(Protocol):
    """What :func:`plan_idle_gpu_servers` reads of a ``usage_units`` row."""

    unit_id: str
    username: str
    started_at: datetime
    gpu_s: float
    gpu_peak_bytes: int


@dataclass(frozen=True)
class IdleGpuServer:
    """A running server holding a GPU, with no kernel busy.

    Attributes
    ----------
    username, server_name
        Its user and JupyterHub server name (``""``: the default server).
    started_at
        When the server started (UTC).
    gpu_hours
        GPU-hours held so far (GPUs held x wall time).
    gpu_peak_mib
        Peak GPU memory of its processes, in MiB.
    last_activity
        The hub's last activity of the server (UTC), None if the hub has none.
    idle_s
        Seconds since then (since the start when the hub has no activity).
    """

    username: str
    server_name: str
    started_at: datetime
    gpu_hours: float
    gpu_peak_mib: float
    last_activity: datetime | None
    idle_s: float


def parse_server_name(unit_id: str, username: str) -> str | None:
    """Return the server name in ``server:<hub id>:<user>:<server name>:<start, ms>``.

    None if ``unit_id`` is not a server unit of ``username``.
    """
    head, sep, _start = unit_id.rpartition(":")
    marker = f":{username}:"
    at = head.rfind(marker)
    if not sep or not head.startswith("server:") or at < 0:
        return None
    return head[at + len(marker) :]


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def plan_idle_gpu_servers(
    holders: Sequence[GpuUnit],
    users: Mapping[str, Mapping[str, Any] | None],
    now: datetime,
    idle_after_s: float = IDLE_AFTER_S,
) -> list[IdleGpuServer]:
    """Return the GPU holders whose server on the hub has been idle ``idle_after_s`` or more.

    Parameters
    ----------
    holders
        Open server units holding a GPU (:func:`gpu_holders`).
    users
        Hub user models by name (``servers`` with ``ready`` and
        ``last_activity``, ISO 8601); None or absent: no hub account.
    now
        The time to measure idleness at (UTC).
    idle_after_s
        Seconds of no activity that mean no kernel is busy (:data:`IDLE_AFTER_S`).

    Returns
    -------
    list of IdleGpuServer
        Longest idle first. A unit whose server is not running on the hub
        (stopped since its last record) is left out.
    """
    rows = []
    for unit in holders:
        name = parse_server_name(unit.unit_id, unit.username)
        model = users.get(unit.username) or {}
        server = (model.get("servers") or {}).get(name) if name is not None else None
        if not server or not server.get("ready"):
            continue
        last = _when(server.get("last_activity"))
        started = unit.started_at if unit.started_at.tzinfo else unit.started_at.replace(tzinfo=UTC)
        idle_s = (now - (last or started)).total_seconds()
        if idle_s >= idle_after_s:
            rows.append(
                IdleGpuServer(
                    username=unit.username,
                    server_name=name or "",
                    started_at=started,
                    gpu_hours=round(unit.gpu_s / 3600, 3),
                    gpu_peak_mib=round(unit.gpu_peak_bytes / 2**20, 1),
                    last_activity=last,
                    idle_s=idle_s,
                )
            )
    return sorted(rows, key=lambda r: (-r.idle_s, r.username, r.server_name))


def gpu_holders(
    session: Session, course_id: str, now: datetime, stale_s: float = STALE_S
) -> list[UsageUnit]:
    """Return the course's running server units that hold a GPU (sampled within ``stale_s``)."""
    return list(
        session.scalars(
            select(UsageUnit)
            .where(
                UsageUnit.course_id == course_id,
                UsageUnit.kind == "server",
                UsageUnit.ended_at.is_(None),
                UsageUnit.last_at >= now - timedelta(seconds=stale_s),
                or_(UsageUnit.gpu_s > 0, UsageUnit.gpu_peak_bytes > 0),
            )
            .order_by(UsageUnit.username)
        )
    )
