"""Resource facts and limits of the running process: CPUs, memory, threads, GPUs, cgroups.

Standard library and psutil only; every other part imports its modules: ``spec``
(``ResourceSpec``), ``units`` (``"4G"`` <-> bytes, durations), ``threads`` (the
thread variables for ``n`` threads), ``cpus`` (the CPUs this process may use),
``gpus`` (NVML), ``cgroups`` and ``cgroupfs`` (per-job cgroups), ``processes``.
See docs/architecture.md.
"""
