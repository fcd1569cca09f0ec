"""What the catalog, the sync and the hub process agree on: course profiles and hub group names.

This module sits at the bottom of the import graph (it imports only
:mod:`coursehub.errors` and :mod:`coursehub.resources`), so the catalog, the
admin side (:mod:`coursehub.hub`) and the hub process (:mod:`coursehub.spawn`)
share one definition of each fact:

* a course profile: :class:`CourseProfile`, validated by :func:`make_profile`
  (the only validator), written as JSON by :func:`profile_to_json` and read
  back by :func:`profile_from_json`, so that what the catalog stores is what
  the spawner applies; its optional Slurm placement (partition, account,
  QOS) becomes the servers' ``COURSEHUB_SLURM_*`` variables (:func:`slurm_env`),
  the runner's Slurm defaults;
* hub group names, nbgrader's convention (nbgrader docs, "Using nbgrader with
  JupyterHub"): :func:`student_group` (``nbgrader-{course_id}``),
  :func:`team_group` (``formgrade-{course_id}``) and :func:`parse_course_group`
  / :func:`course_id_of_group` (None for another group, or an empty id);
* the group :data:`MANAGED_USERS_GROUP` that lists the users coursehub created;
* the names the rendered hub configuration uses: :data:`SPAWNER_KINDS`,
  :data:`NO_COURSE_CHOICES`, :data:`BUSY_EXTENSION` and :data:`SERVER_ARG`;
* :data:`SANDBOX_CSP`, the ``Content-Security-Policy`` of every page whose
  content a student or a book author wrote (the course app's books, the
  formgrader's submission files).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from coursehub.errors import UsageError
from coursehub.resources.spec import ResourceSpec, check_count
from coursehub.resources.units import describe_mem, format_mem, parse_mem, parse_optional_mem

#: Hub group of a course's students (nbgrader's name).
STUDENT_GROUP_PREFIX = "nbgrader-"
#: Hub group of a course's teaching team: lead, teacher, grader (nbgrader's name).
TEAM_GROUP_PREFIX = "formgrade-"
#: Role of each course group prefix, as written in the group's ``role`` property.
COURSE_GROUP_ROLES: Mapping[str, str] = {
    STUDENT_GROUP_PREFIX: "students",
    TEAM_GROUP_PREFIX: "team",
}
#: Hub group listing every user coursehub put on the hub (only those may be pruned).
MANAGED_USERS_GROUP = "coursehub-users"

#: Spawner kinds a profile can be applied to (:func:`coursehub.spawn.profiles.spawner_override`).
SPAWNER_KINDS: tuple[str, ...] = ("local", "systemd", "slurm", "kubernetes")
#: What a user in no course gets: the default profile, or a refusal (both with a notice).
NO_COURSE_CHOICES: tuple[str, ...] = ("default", "refuse")
#: Dotted path of the busy-kernel jupyter_server extension (:mod:`coursehub.spawn.busyactivity`).
#: ``Content-Security-Policy`` of pages written by others than the app (a course's book, a
#: student's submitted files): scripts, forms and pop-ups run, in an opaque origin, never the
#: app's (no ``allow-same-origin``: no cookie, no API call as the reader), see
#: https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy/sandbox
SANDBOX_CSP = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox"
BUSY_EXTENSION = "coursehub.spawn.busyactivity"
#: The out-of-memory notice (:mod:`coursehub.spawn.oomnotice`), loaded with :data:`BUSY_EXTENSION`.
OOM_EXTENSION = "coursehub.spawn.oomnotice"
#: The home quota on the disk display (:mod:`coursehub.spawn.homedisk`), loaded with it too.
HOMEDISK_EXTENSION = "coursehub.spawn.homedisk"
#: The single-user server argument that enables :data:`BUSY_EXTENSION`.
SERVER_ARG = f"--ServerApp.jpserver_extensions={BUSY_EXTENSION}=True"
#: The profile's Slurm placement fields, in sbatch(1) option order.
SLURM_FIELDS: tuple[str, ...] = ("partition", "account", "qos")
#: Variables that carry them into a server and its runner jobs
#: (:class:`coursehub.runner.slurm.plan.SlurmPlacement` reads them).
SLURM_ENV_VARS: Mapping[str, str] = {
    "partition": "COURSEHUB_SLURM_PARTITION",
    "account": "COURSEHUB_SLURM_ACCOUNT",
    "qos": "COURSEHUB_SLURM_QOS",
}
#: The variable that carries a profile's ``gpu_mem_limit`` (bytes) into a server, where
#: the runner reads it as its jobs' default GPU memory budget (``coursehub run --gpu-mem``).
GPU_MEM_LIMIT_VAR = "COURSEHUB_GPU_MEM_LIMIT"
#: A Slurm partition, account or QOS name as a profile may hold it: a letter or
#: digit, then letters, digits, ``_ . -``, at most 64 characters. A conservative
#: subset of what slurm.conf(5) and sacctmgr(1) accept, so that the name goes into
#: ``#SBATCH`` lines and sbatch options without quoting.
SLURM_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Default of ``BusyKernelActivity.max_busy_s``: 24 hours.
MAX_BUSY_S = 24 * 3600.0


class ProfileError(UsageError):
    """A course profile is malformed or out of range; the message names the profile and field."""


def student_group(course_id: str) -> str:
    """Return the hub group of a course's students: ``nbgrader-{course_id}``."""
    return _group(STUDENT_GROUP_PREFIX, course_id)


def team_group(course_id: str) -> str:
    """Return the hub group of a course's teaching team: ``formgrade-{course_id}``."""
    return _group(TEAM_GROUP_PREFIX, course_id)


def _group(prefix: str, course_id: str) -> str:
    if not course_id:
        raise UsageError(f"a course group needs a course id, got {course_id!r}")
    return prefix + course_id


def parse_course_group(name: str) -> tuple[str, str] | None:
    """Return ``(role, course_id)`` of a course group (role ``"students"`` or ``"team"``).

    None for any other group, including a bare prefix (``"nbgrader-"``: no course id).
    """
    for prefix, role in COURSE_GROUP_ROLES.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            return role, name[len(prefix) :]
    return None


def course_id_of_group(name: str) -> str | None:
    """Return the ``course_id`` of a course group name, else None (:func:`parse_course_group`)."""
    parsed = parse_course_group(name)
    return parsed[1] if parsed else None


@dataclass(frozen=True)
class CourseProfile:
    """The per-user limits of a course's servers (build it with :func:`make_profile`).

    Attributes
    ----------
    name
        Profile name shown to users (``"m2-2cpu-4g"``).
    cpu_limit
        CPUs (a CFS quota; may be fractional).
    mem_limit
        Memory limit in bytes.
    n_threads
        Threads per numerical library, >= 1 (``floor(cpu_limit)`` by default).
    gpus
        GPUs per server, >= 0.
    jobs_per_gpu
        Servers (or runner jobs) that may share one GPU, >= 1.
    partition, account, qos
        Slurm placement of the course's servers and runner jobs (None: the
        cluster's default), e.g. a GPU course's ``partition="gpu"``.
    gpu_mem_limit
        GPU memory budget of one runner job in bytes, CUDA context included
        (what NVML's ``nvmlDeviceGetComputeRunningProcesses`` reports for the
        job's processes), or None: an equal share of the GPU
        (:mod:`coursehub.runner.gpumem`).
    """

    name: str
    cpu_limit: float
    mem_limit: int
    n_threads: int
    gpus: int = 0
    jobs_per_gpu: int = 1
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpu_mem_limit: int | None = None

    def describe(self) -> str:
        """Return a one-line summary: ``"2 CPU, 4G, 2 threads"`` (+ ``", 1 GPU, partition gpu"``).

        The Slurm fields appear only when set.
        """
        text = f"{self.cpu_limit:g} CPU, {format_mem(self.mem_limit)}, {self.n_threads} threads"
        text += f", {self.gpus} GPU" if self.gpus else ""
        text += f" ({describe_mem(self.gpu_mem_limit)} a job)" if self.gpu_mem_limit else ""
        return text + "".join(f", {f} {getattr(self, f)}" for f in SLURM_FIELDS if getattr(self, f))


#: Profile of a user who is in no course (or whose courses have no profile).
DEFAULT_PROFILE = CourseProfile(name="default", cpu_limit=1.0, mem_limit=2 * 1024**3, n_threads=1)


def make_profile(
    name: str,
    cpu_limit: float | str,
    mem_limit: int | str,
    n_threads: int | None = None,
    gpus: int = 0,
    jobs_per_gpu: int = 1,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    gpu_mem_limit: int | str | None = None,
) -> CourseProfile:
    """Return a checked :class:`CourseProfile`: the one validator of a profile's limits.

    Parameters
    ----------
    name
        The profile's name, for messages.
    cpu_limit
        CPUs per user, > 0 and finite (fractions allowed, e.g. 0.5).
    mem_limit
        Bytes, or a specification such as ``"4G"`` (JupyterHub's
        ``ByteSpecification``: ``"4G"`` = 4 GiB, :func:`coursehub.resources.units.parse_mem`).
    n_threads
        Threads per process, >= 1; None means ``floor(cpu_limit)`` (at least
        1), :func:`coursehub.resources.threads.threads_for_cpu_limit`.
    gpus, jobs_per_gpu
        GPUs per user (>= 0) and servers or jobs sharing one GPU (>= 1).
    partition, account, qos
        Slurm names (:data:`SLURM_NAME_RE`); None or blank: the cluster's default.
    gpu_mem_limit
        GPU memory budget of one runner job: bytes, or a specification such
        as ``"1.5G"`` (:func:`coursehub.resources.units.parse_mem`); None or
        blank: none (an equal share of the GPU). Only with ``gpus`` >= 1.

    Raises
    ------
    ProfileError
        Naming the profile and the value at fault.
    """
    try:
        mem_bytes = parse_mem(mem_limit)
        if isinstance(cpu_limit, bool):
            raise UsageError(f"cpu_limit must be a number of CPUs, got {cpu_limit!r}")
        gpu_bytes = parse_optional_mem(gpu_mem_limit, "gpu_mem_limit")
        spec = ResourceSpec(float(cpu_limit), mem_bytes, n_threads, gpus, gpu_bytes)
        check_count("jobs_per_gpu", jobs_per_gpu, 1)
        placement = [
            check_slurm_name(f, v)
            for f, v in zip(SLURM_FIELDS, (partition, account, qos), strict=True)
        ]
    except (UsageError, TypeError, ValueError) as exc:
        raise ProfileError(f"profile {name!r}: {exc}") from None
    partition, account, qos = placement
    cpus, threads, gpu_bytes = spec.cpus, spec.threads, spec.gpu_mem_limit
    return CourseProfile(
        str(name), cpus, mem_bytes, threads, gpus, jobs_per_gpu, partition, account, qos, gpu_bytes
    )


def check_slurm_name(field_name: str, value: object) -> str | None:
    """Return a Slurm partition/account/QOS name stripped, None when blank.

    Raises
    ------
    UsageError
        Naming the field, when ``value`` is not text matching :data:`SLURM_NAME_RE`.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{field_name} must be a Slurm name (text), got {value!r}")
    text = value.strip()
    if not text:
        return None
    if not SLURM_NAME_RE.fullmatch(text):
        raise UsageError(
            f"{field_name} {text!r} is not a Slurm name: a letter or digit, then letters, "
            "digits, '_', '.' or '-', at most 64 characters"
        )
    return text


def slurm_env(profile: CourseProfile) -> dict[str, str]:
    """Return ``COURSEHUB_SLURM_PARTITION``, ``_ACCOUNT``, ``_QOS`` for the fields that are set."""
    return {SLURM_ENV_VARS[f]: getattr(profile, f) for f in SLURM_FIELDS if getattr(profile, f)}


def gpu_mem_env(profile: CourseProfile) -> dict[str, str]:
    """Return ``{COURSEHUB_GPU_MEM_LIMIT: bytes}`` for a GPU profile with a budget, else {}."""
    if not profile.gpus or not profile.gpu_mem_limit:
        return {}
    return {GPU_MEM_LIMIT_VAR: str(profile.gpu_mem_limit)}


def profile_to_json(profile: CourseProfile) -> dict[str, Any]:
    """Return the JSON object of a profile (memory in bytes), as :func:`profile_from_json` reads it.

    This is the ``profile`` property of a course's hub groups and the
    ``profile`` of the course app's API answers.
    """
    return {
        "name": profile.name,
        "cpu_limit": float(profile.cpu_limit),
        "mem_limit": int(profile.mem_limit),
        "n_threads": int(profile.n_threads),
        "gpus": int(profile.gpus),
        "jobs_per_gpu": int(profile.jobs_per_gpu),
        # only the Slurm fields that are set: a profile without them reads as before
        **{f: getattr(profile, f) for f in SLURM_FIELDS if getattr(profile, f)},
        **({"gpu_mem_limit": int(profile.gpu_mem_limit)} if profile.gpu_mem_limit else {}),
    }


def profile_from_json(data: Any, where: str = "profile") -> CourseProfile:
    """Return the profile a JSON object describes (:func:`profile_to_json`'s output).

    Parameters
    ----------
    data
        ``{"name", "cpu_limit", "mem_limit", "n_threads", "gpus", "jobs_per_gpu",
        "partition", "account", "qos", "gpu_mem_limit"}``; ``mem_limit`` and
        ``gpu_mem_limit`` in bytes or as text (``"4G"``); all but ``cpu_limit``
        and ``mem_limit`` are optional.
    where
        Where the object comes from, for messages (e.g. the hub group's name).

    Raises
    ------
    ProfileError
        If ``data`` is not an object, a key is missing or a value is out of
        range; the message names ``where``.
    """
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where}: a profile must be a JSON object, got {data!r}")
    missing = [key for key in ("cpu_limit", "mem_limit") if data.get(key) is None]
    if missing:
        raise ProfileError(f"{where}: profile has no {missing[0]!r}")
    try:
        return make_profile(
            name=str(data.get("name") or "course"),
            cpu_limit=data["cpu_limit"],
            mem_limit=data["mem_limit"],
            n_threads=data.get("n_threads"),
            gpus=_or_default(data.get("gpus"), 0),
            jobs_per_gpu=_or_default(data.get("jobs_per_gpu"), 1),
            partition=data.get("partition"),
            account=data.get("account"),
            qos=data.get("qos"),
            gpu_mem_limit=data.get("gpu_mem_limit"),
        )
    except ProfileError as exc:
        raise ProfileError(f"{where}: {exc}") from None


def _or_default(value: Any, default: int) -> Any:
    return default if value is None else value


# --- the hub's id: every host-wide name of a hub carries it (coursehub.spawn.identity) ---

#: JupyterHub's default ``JupyterHub.db_url`` (jupyterhub/app.py).
DEFAULT_DB_URL = "sqlite:///jupyterhub.sqlite"
#: Hex digits of the SHA-256 kept in a hub id (40 bits: collisions need ~10^6 hubs on one host).
HUB_ID_DIGITS = 10


def plan_hub_identity(db_url: str, cwd: str) -> str:
    """Return the text a hub id is hashed from: ``db_url`` made absolute, without password.

    Parameters
    ----------
    db_url
        ``JupyterHub.db_url`` (SQLAlchemy URL). ``sqlite:///rel.sqlite`` is
        relative to ``cwd``; ``sqlite:////abs.sqlite`` is absolute.
    cwd
        The hub's working directory.
    """
    if db_url.startswith("sqlite:///"):
        path = db_url[len("sqlite:///") :].split("?", 1)[0]
        if path and path != ":memory:":
            return "sqlite:///" + os.path.normpath(os.path.join(cwd, path))
        return db_url
    parts = urlsplit(db_url)
    if parts.password is not None:
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}@{netloc[1]}")
    return urlunsplit(parts)


def plan_hub_id(identity: str) -> str:
    """Return the hub id of ``identity``: the first :data:`HUB_ID_DIGITS` hex digits of SHA-256."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:HUB_ID_DIGITS]


def hub_id_for_db_url(db_url: str | None = None, cwd: str | None = None) -> str:
    """Return the hub id of a hub whose database is ``db_url`` (None: JupyterHub's default)."""
    return plan_hub_id(plan_hub_identity(db_url or DEFAULT_DB_URL, cwd or os.getcwd()))


def hub_id_of_data_dir(data_dir: str) -> str:
    """Return the hub id of a hub rendered with ``data_dir`` (its ``jupyterhub.sqlite`` there).

    The rendered hub configuration (``coursehub.hub.render``) and the demo
    put the hub's database in its data folder (``c.JupyterHub.db_url = "sqlite:///<data_dir>/jupyterhub.sqlite"``).
    """
    path = os.path.abspath(data_dir)
    return hub_id_for_db_url(f"sqlite:///{path}/jupyterhub.sqlite")
