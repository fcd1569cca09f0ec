"""Resource facts and limits: CPU quota, memory, threads, GPUs.

Standard library and psutil only; every other part imports this one.
"""

from coursehub.resources.cpus import effective_cpus
from coursehub.resources.threads import N_THREAD_VARS, thread_env, threads_for_cpu_limit

__all__ = ["N_THREAD_VARS", "effective_cpus", "thread_env", "threads_for_cpu_limit"]
