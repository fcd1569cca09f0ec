"""Resource profiles: the per-user CPU, memory, thread and GPU limits of a course.

Rules, JSON form and messages come from :mod:`coursehub.contract` (one
validator, :func:`coursehub.contract.make_profile`: memory as JupyterHub's
``ByteSpecification``, ``"4G"`` = 4 GiB, stored in bytes; threads default to
``floor(cpu_limit)``), so a profile stored here is what the sync writes on
the hub and what the spawner applies. Functions flush, never commit.
"""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError, ValidationError
from coursehub.catalog.models.courses import Course, ResourceProfile
from coursehub.contract import (
    SLURM_FIELDS,
    CourseProfile,
    ProfileError,
    make_profile,
    profile_to_json,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Fields that :func:`update_profile` may change.
PROFILE_FIELDS = frozenset(
    {"cpu_limit", "mem_limit", "n_threads", "gpus", "jobs_per_gpu", "gpu_mem_limit", *SLURM_FIELDS}
)


def check_profile_values(
    name: str,
    cpu_limit: float,
    mem_limit: int | str,
    n_threads: int | None = None,
    gpus: int = 0,
    jobs_per_gpu: int = 1,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    gpu_mem_limit: int | str | None = None,
) -> dict[str, float | int | str | None]:
    """Validate a profile's limits (:func:`coursehub.contract.make_profile`); return them as stored.

    Parameters and rules are those of :func:`coursehub.contract.make_profile`
    (memory and ``gpu_mem_limit`` in bytes or as ``"4G"``; ``n_threads`` None:
    ``floor(cpu_limit)``; ``gpu_mem_limit`` None: no budget of its own).

    Raises
    ------
    ValidationError
        The contract's :class:`~coursehub.contract.ProfileError` message,
        naming the profile and the field at fault.
    """
    try:
        limits = (cpu_limit, mem_limit, n_threads, gpus, jobs_per_gpu)
        profile = make_profile(name, *limits, partition, account, qos, gpu_mem_limit)
    except ProfileError as exc:
        raise ValidationError(str(exc)) from None
    values: dict[str, float | int | str | None] = profile_to_json(profile)
    del values["name"]
    for field in SLURM_FIELDS:  # stored as NULL when unset (the JSON leaves them out)
        values[field] = getattr(profile, field)
    values["gpu_mem_limit"] = profile.gpu_mem_limit
    return values


def course_profile(profile: ResourceProfile) -> CourseProfile:
    """Return a stored profile as the contract's :class:`~coursehub.contract.CourseProfile`."""
    return CourseProfile(
        name=profile.name,
        cpu_limit=float(profile.cpu_limit),
        mem_limit=int(profile.mem_limit),
        n_threads=int(profile.n_threads),
        gpus=int(profile.gpus),
        jobs_per_gpu=int(profile.jobs_per_gpu),
        partition=profile.partition,
        account=profile.account,
        qos=profile.qos,
        gpu_mem_limit=profile.gpu_mem_limit,
    )


def profile_json(profile: ResourceProfile) -> dict[str, object]:
    """Return a stored profile as JSON (:func:`coursehub.contract.profile_to_json`)."""
    return profile_to_json(course_profile(profile))


def create_profile(
    session: Session,
    name: str,
    cpu_limit: float,
    mem_limit: int | str,
    n_threads: int | None = None,
    gpus: int = 0,
    jobs_per_gpu: int = 1,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    gpu_mem_limit: int | str | None = None,
) -> ResourceProfile:
    """Add a resource profile (:func:`check_profile_values`); :class:`ConflictError` if taken."""
    name = name.strip()
    if not _NAME.match(name):
        raise ValidationError(
            f"profile name {name!r} must be 1-64 letters, digits, '.', '_' or '-'"
        )
    limits = (cpu_limit, mem_limit, n_threads, gpus, jobs_per_gpu)
    values = check_profile_values(name, *limits, partition, account, qos, gpu_mem_limit)
    if session.scalar(select(ResourceProfile).where(ResourceProfile.name == name)):
        raise ConflictError(f"profile {name} already exists")
    profile = ResourceProfile(name=name, **values)
    session.add(profile)
    session.flush()
    return profile


def get_profile(session: Session, name: str) -> ResourceProfile:
    """Return the profile called ``name``; :class:`NotFoundError` if there is none."""
    profile = session.scalar(select(ResourceProfile).where(ResourceProfile.name == name.strip()))
    if profile is None:
        raise NotFoundError(f"no resource profile {name!r}")
    return profile


def list_profiles(session: Session) -> list[ResourceProfile]:
    """Return every resource profile, by name."""
    return list(session.scalars(select(ResourceProfile).order_by(ResourceProfile.name)))


def update_profile(
    session: Session, profile: ResourceProfile, **changes: object
) -> ResourceProfile:
    """Change some limits of a profile; the others keep their values.

    Changing ``cpu_limit`` without ``n_threads`` resets ``n_threads`` to
    ``floor(cpu_limit)``. :class:`ValidationError` for an unknown field or a
    bad value.
    """
    unknown = set(changes) - PROFILE_FIELDS
    if unknown:
        raise ValidationError(f"profile {profile.name}: cannot edit {', '.join(sorted(unknown))}")
    current: dict[str, object] = {f: getattr(profile, f) for f in PROFILE_FIELDS}
    if "cpu_limit" in changes and "n_threads" not in changes:
        current["n_threads"] = None
    current.update(changes)
    values = check_profile_values(profile.name, **current)  # type: ignore[arg-type]
    for field, value in values.items():
        setattr(profile, field, value)
    session.flush()
    return profile


def delete_profile(session: Session, profile: ResourceProfile) -> None:
    """Delete a profile that no course uses; :class:`ConflictError` naming the courses otherwise."""
    users = session.scalars(
        select(Course.course_id).where(
            (Course.profile_pk == profile.id) | (Course.team_profile_pk == profile.id)
        )
    ).all()
    if users:
        raise ConflictError(f"profile {profile.name} is used by {', '.join(sorted(users))}")
    session.delete(profile)
    session.flush()
