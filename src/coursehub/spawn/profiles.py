"""Course resource profiles and what they mean for each kind of spawner (pure functions).

Loaded by the hub process. A course's profile travels from the catalog to
the hub in the properties of its hub groups (written by ``coursehub hub
sync``, :mod:`coursehub.hub.sync`, as :func:`coursehub.contract.profile_to_json`),
so the spawner reads it from ``spawner.user.groups`` with
:func:`coursehub.contract.profile_from_json` and never needs the catalog database.

:func:`spawner_override` turns one profile into the spawner traits of one
spawner kind (JupyterHub documentation, "Spawners", for the base traits;
the READMEs of jupyterhub/systemdspawner, jupyterhub/batchspawner and
jupyterhub/kubespawner for the others):

============  =============================================================
kind          traits set
============  =============================================================
``local``     ``cpu_limit``, ``mem_limit`` (enforced by
              :mod:`coursehub.spawn.cgroupspawner`), ``visible_gpus`` (the
              cgroup v1 devices controller hides every other NVIDIA device,
              :mod:`coursehub.spawn.devices`), ``environment``
``systemd``   ``cpu_limit`` (-> ``CPUQuota``), ``mem_limit`` (->
              ``MemoryMax``), ``unit_extra_properties`` (``MemorySwapMax=0``,
              ``DevicePolicy``/``DeviceAllow`` for GPUs), ``isolate_devices``
              (no GPU: hide every device), ``environment``
``slurm``     ``req_nprocs``, ``req_memory``, ``req_ngpus`` and ``req_gres``
              (batchspawner), ``cpu_limit``, ``mem_limit``, ``environment``;
              GPUs are hidden by Slurm itself only with
              ``ConstrainDevices=yes`` in ``cgroup.conf`` (a job then opens
              only the GPUs of its ``--gres``, none without)
``kubernetes`` ``cpu_limit``, ``mem_limit``, ``extra_resource_limits``
              (``nvidia.com/gpu``), ``environment`` (no GPU:
              ``NVIDIA_VISIBLE_DEVICES=void``, so that an image setting it to
              ``all`` sees no GPU where the NVIDIA runtime is the default)
============  =============================================================

``environment`` always carries the thread variables of
:func:`coursehub.resources.threads.thread_env` for ``n_threads`` (``floor(cpu_limit)``
by default), so that numerical libraries do not start one thread per host
core inside a small CPU quota (the OpenMP specification, environment
variable ``OMP_NUM_THREADS``; PyTorch documentation, "CPU threading and
TorchScript inference").
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coursehub.contract import (
    DEFAULT_PROFILE,
    SPAWNER_KINDS,
    CourseProfile,
    gpu_mem_env,
    parse_course_group,
    profile_from_json,
    slurm_env,
)
from coursehub.errors import UsageError
from coursehub.resources.threads import thread_env
from coursehub.resources.units import format_mem

__all__ = [
    "NVIDIA_CONTROL_DEVICES",
    "CourseChoice",
    "UnitPropertyValues",
    "choose_profile",
    "generosity",
    "parse_options_form",
    "plan_choices",
    "plan_gpu_assignment",
    "render_no_course_form",
    "render_options_form",
    "spawner_override",
]

#: NVIDIA device nodes every CUDA process needs besides its own ``/dev/nvidiaN``.
NVIDIA_CONTROL_DEVICES: tuple[str, ...] = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
)


class UnitPropertyValues(list[str]):
    """Values of a systemd unit property given several times (``DeviceAllow=``).

    SystemdSpawner passes a list value of ``unit_extra_properties`` as one
    ``--property`` per entry, but first expands ``{USERNAME}`` and
    ``{USERID}`` in every value with ``value.format(...)``
    (jupyterhub-systemdspawner 1.0.2, ``SystemdSpawner.start``), which a
    plain list lacks: this list formats each of its entries.
    """

    def format(self, *args: Any, **kwargs: Any) -> UnitPropertyValues:
        """Return a copy with ``str.format(*args, **kwargs)`` applied to each entry."""
        return UnitPropertyValues(value.format(*args, **kwargs) for value in self)


@dataclass(frozen=True)
class CourseChoice:
    """A profile a user may start with: its course, the user's ``role`` there ("team" or
    "students", :data:`coursehub.contract.COURSE_GROUP_ROLES`) and that role's profile."""

    course_id: str
    title: str
    profile: CourseProfile
    role: str = "students"

    @property
    def key(self) -> str:
        """The form value that selects this choice: the ``course_id``."""
        return self.course_id


def generosity(profile: CourseProfile) -> tuple[int, float, int, int]:
    """Sort key: more GPUs, then more CPUs, more memory, more threads is more generous."""
    return (profile.gpus, profile.cpu_limit, profile.mem_limit, profile.n_threads)


def plan_choices(groups: Iterable[tuple[str, Mapping[str, Any]]]) -> list[CourseChoice]:
    """Return the profiles a user may choose from, most generous first.

    Parameters
    ----------
    groups
        The user's hub groups as ``(name, properties)`` pairs. Only course
        groups (``nbgrader-*``, ``formgrade-*``) whose properties hold a
        ``profile`` count; the course title is ``properties["title"]`` when
        set. A course is listed once, with the profile of the user's role in
        it: its team group's (``formgrade-*``) over its students' (``nbgrader-*``).

    Returns
    -------
    list of CourseChoice
        One per course, sorted by :func:`generosity` (descending), then by
        ``course_id``. Empty for a user in no course with a profile.

    Raises
    ------
    UsageError
        If a course group holds a malformed profile (the message names the group).
    """
    found: dict[str, CourseChoice] = {}
    for name, properties in groups:
        role, course_id = parse_course_group(name) or ("", "")
        seen = found.get(course_id)
        if not course_id or not properties.get("profile") or (seen and seen.role == "team"):
            continue
        profile = profile_from_json(properties["profile"], where=f"hub group {name}")
        title = str(properties.get("title") or course_id)
        found[course_id] = CourseChoice(course_id, title, profile, role)
    return sorted(found.values(), key=lambda c: ([-v for v in generosity(c.profile)], c.course_id))


def choose_profile(
    choices: Sequence[CourseChoice],
    requested: str | None,
    default: CourseProfile = DEFAULT_PROFILE,
) -> CourseProfile:
    """Return the profile a server starts with.

    Parameters
    ----------
    choices
        The user's own choices (:func:`plan_choices`), most generous first.
    requested
        The ``course_id`` picked on the spawn page, or None / "" for the default.
    default
        Profile of a user with no choice at all.

    Raises
    ------
    UsageError
        If ``requested`` is not one of the user's own courses.
    """
    if not choices:
        if requested:
            raise UsageError(f"course {requested!r} is not one of your courses")
        return default
    if not requested:
        return choices[0].profile
    for choice in choices:
        if choice.key == requested:
            return choice.profile
    raise UsageError(f"course {requested!r} is not one of your courses")


def render_options_form(choices: Sequence[CourseChoice]) -> str:
    """Return the spawn-page HTML that lets a user pick one of ``choices`` ("" for fewer than 2).

    The form field is ``course``; the first (most generous) choice is selected.
    Each option names its course id, since two years of a course share a title.
    JupyterHub shows no form when the string is empty.
    """
    if len(choices) < 2:
        return ""
    options = [
        f'<option value="{html.escape(c.key)}"{" selected" if i == 0 else ""}>'
        f"{html.escape(c.title)} [{html.escape(c.course_id)}]"
        f"{' (team)' if c.role == 'team' else ''}"
        f" ({html.escape(c.profile.describe())})</option>"
        for i, c in enumerate(choices)
    ]
    return (
        '<label for="coursehub-course">Course resources</label>\n'
        '<select class="form-control" id="coursehub-course" name="course">\n'
        + "\n".join(options)
        + "\n</select>"
    )


#: Spawn-page notice and refusal for a user in no course (``CourseProfiles.no_course``).
NO_COURSE_DEFAULT = (
    "You are in no course yet; your server starts with the default profile ({resources}). "
    "A student asks their teacher to be added to a course's roster; "
    "a teacher asks the course's lead to be added to its team."
)
NO_COURSE_REFUSED = (
    "You are in no course yet, so no server can start for you. "
    "A student asks their teacher to be added to a course's roster; "
    "a teacher asks the course's lead to be added to its team."
)


def render_no_course_form(default: CourseProfile, no_course: str = "default") -> str:
    """Return the spawn-page notice of a user in no course (never "": the page must show).

    Parameters
    ----------
    default
        The profile such a user starts with (``no_course="default"``).
    no_course
        ``"default"``: the notice names the default profile's CPUs and
        memory, and the Start button starts it. ``"refuse"``: the notice
        says nothing can start, and the Start button is hidden.
    """
    if no_course == "refuse":
        return (
            '<p class="alert alert-warning" id="coursehub-no-course">'
            f"{html.escape(NO_COURSE_REFUSED)}</p>\n"
            "<style>#spawn_form [type=submit] {display: none;}</style>"
        )
    resources = f"{default.cpu_limit:g} CPU, {format_mem(default.mem_limit)}"
    if default.gpus:
        resources += f", {default.gpus} GPU"
    text = NO_COURSE_DEFAULT.format(resources=resources)
    return f'<p class="alert alert-info" id="coursehub-no-course">{html.escape(text)}</p>'


def parse_options_form(formdata: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Return ``user_options`` from the spawn form's data: ``{"course": course_id}`` or ``{}``."""
    values = formdata.get("course") or []
    course = values[0].strip() if values else ""
    return {"course": course} if course else {}


def spawner_override(
    profile: CourseProfile,
    kind: str,
    gpu_ids: Sequence[int] = (),
    keep_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return the spawner traits that apply ``profile`` on a spawner of ``kind``.

    Parameters
    ----------
    profile
        The profile to apply.
    kind
        One of :data:`SPAWNER_KINDS`.
    gpu_ids
        GPU indices assigned to this server (``local`` and ``systemd``, where
        coursehub assigns GPUs; Slurm and Kubernetes assign their own).
    keep_env
        Environment set explicitly by the admin: its thread variables win.

    Returns
    -------
    dict
        Trait name -> value, in the shape of ``Spawner.group_overrides``'
        ``spawner_override`` entries.

    Raises
    ------
    UsageError
        If ``kind`` is unknown, or fewer GPUs were given than the profile asks
        for (local, systemd).
    """
    if kind not in SPAWNER_KINDS:
        raise UsageError(f"unknown spawner kind {kind!r}: choose one of {', '.join(SPAWNER_KINDS)}")
    if kind in ("local", "systemd") and len(gpu_ids) < profile.gpus:
        raise UsageError(
            f"profile {profile.name!r} needs {profile.gpus} GPU(s), got {len(gpu_ids)}"
        )
    override: dict[str, Any] = {
        "cpu_limit": profile.cpu_limit,
        "mem_limit": profile.mem_limit,
        "environment": _environment(profile, kind, gpu_ids, keep_env or {}),
    }
    override.update(_KIND_TRAITS[kind](profile, list(gpu_ids)[: profile.gpus]))
    return override


def _environment(
    profile: CourseProfile, kind: str, gpu_ids: Sequence[int], keep_env: Mapping[str, str]
) -> dict[str, str]:
    env = thread_env(profile.n_threads, keep=keep_env)
    env.update({**slurm_env(profile), **gpu_mem_env(profile)})  # the runner's defaults there
    if kind in ("local", "systemd"):
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_ids[: profile.gpus])
    if kind == "kubernetes" and not profile.gpus:
        # NVIDIA container toolkit: "void" (or empty) = no GPU, even if the image says "all"
        # (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


def _local_traits(profile: CourseProfile, gpu_ids: list[int]) -> dict[str, Any]:
    return {"visible_gpus": list(gpu_ids)}


def _systemd_traits(profile: CourseProfile, gpu_ids: list[int]) -> dict[str, Any]:
    properties: dict[str, Any] = {"MemorySwapMax": "0"}
    if gpu_ids:
        devices = [f"/dev/nvidia{i}" for i in gpu_ids] + list(NVIDIA_CONTROL_DEVICES)
        properties["DevicePolicy"] = "closed"
        properties["DeviceAllow"] = UnitPropertyValues(f"{device} rw" for device in devices)
    return {"unit_extra_properties": properties, "isolate_devices": not gpu_ids}


def _slurm_traits(profile: CourseProfile, gpu_ids: list[int]) -> dict[str, Any]:
    traits = {
        "req_nprocs": str(math.ceil(profile.cpu_limit)),
        # Slurm reads --mem in MiB without a suffix; round up to a whole MiB.
        "req_memory": f"{math.ceil(profile.mem_limit / 1024**2)}M",
        "req_ngpus": str(profile.gpus) if profile.gpus else "",
        "req_gres": f"gpu:{profile.gpus}" if profile.gpus else "",
    }
    # the course's placement: SlurmSpawner's script renders a partition, not account/qos
    if profile.partition:
        traits["req_partition"] = profile.partition
    options = [f"--{f}={getattr(profile, f)}" for f in ("account", "qos") if getattr(profile, f)]
    if options:
        traits["req_options"] = " ".join(options)
    return traits


def _kubernetes_traits(profile: CourseProfile, gpu_ids: list[int]) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(profile.gpus)} if profile.gpus else {}
    return {"extra_resource_limits": limits}


_KIND_TRAITS = {
    "local": _local_traits,
    "systemd": _systemd_traits,
    "slurm": _slurm_traits,
    "kubernetes": _kubernetes_traits,
}


def plan_gpu_assignment(
    loads: Mapping[int, int], gpu_ids: Sequence[int], n_gpus: int, jobs_per_gpu: int
) -> list[int]:
    """Return the ``n_gpus`` least-loaded GPUs that have room for one more server.

    Parameters
    ----------
    loads
        GPU index -> servers already assigned to it (missing = 0).
    gpu_ids
        The GPUs of this machine (NVML indices).
    n_gpus
        GPUs the server needs.
    jobs_per_gpu
        Servers one GPU may hold.

    Returns
    -------
    list of int
        GPU indices, least loaded first (ties: lower index first); [] if
        ``n_gpus`` is 0.

    Raises
    ------
    UsageError
        If fewer than ``n_gpus`` GPUs have room.
    """
    if n_gpus <= 0:
        return []
    free = sorted((loads.get(i, 0), i) for i in gpu_ids if loads.get(i, 0) < jobs_per_gpu)
    if len(free) < n_gpus:
        raise UsageError(
            f"no GPU free: {n_gpus} needed, {len(free)} of {len(gpu_ids)} GPU(s) have room "
            f"(at most {jobs_per_gpu} server(s) per GPU); try again later"
        )
    return [index for _, index in free[:n_gpus]]
