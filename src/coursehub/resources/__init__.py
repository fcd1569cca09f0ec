"""Resource facts and limits: CPU quota, memory, threads, GPUs.

Standard library and psutil only; every other part imports this one.

* :class:`ResourceSpec` - cpu_limit, mem_limit (bytes), n_threads, gpus.
* :func:`parse_mem` / :func:`format_mem` - ``"4G"`` <-> bytes (JupyterHub's
  conventions); :func:`parse_duration` - ``"30m"`` -> seconds.
* :func:`thread_env` - the thread variables for ``n`` threads.
* :func:`effective_cpus` - CPUs this process may use (cgroup quota, cpuset,
  affinity).
* :func:`gpu_inventory` - GPUs through NVML, [] without GPU.
* :class:`JobCgroup` - a per-job cgroup (see :mod:`coursehub.resources.cgroups`).
"""

from coursehub.resources.cgroups import (
    CgroupStats,
    CgroupUnavailableError,
    JobCgroup,
    systemd_available,
    systemd_run_command,
)
from coursehub.resources.cpus import affinity_cpus, effective_cpus
from coursehub.resources.gpus import GpuInfo, GpuProcess, gpu_inventory, gpu_memory_of
from coursehub.resources.spec import ResourceSpec, check_count
from coursehub.resources.threads import N_THREAD_VARS, thread_env, threads_for_cpu_limit
from coursehub.resources.units import (
    describe_duration,
    describe_mem,
    format_mem,
    parse_duration,
    parse_mem,
)

__all__ = [
    "N_THREAD_VARS",
    "CgroupStats",
    "CgroupUnavailableError",
    "GpuInfo",
    "GpuProcess",
    "JobCgroup",
    "ResourceSpec",
    "affinity_cpus",
    "check_count",
    "describe_duration",
    "describe_mem",
    "effective_cpus",
    "format_mem",
    "gpu_inventory",
    "gpu_memory_of",
    "parse_duration",
    "parse_mem",
    "systemd_available",
    "systemd_run_command",
    "thread_env",
    "threads_for_cpu_limit",
]
