"""Usage metering on the hub and runner side: what a server or a job used, as JSON lines.

This package is loaded by every process that starts work (the hub process
through the cgroup spawners, the runner at a job's end). It never imports the
catalog: it writes append-only JSON-lines files in a usage folder, which the
course app (``coursehub usage ingest``, :mod:`coursehub.catalog.usage.ingest`)
reads into the catalog. See docs/usage.md.

Modules
-------
``coursehub.meter.cgroupread``
    ``read_cgroup_usage`` (CPU-seconds, memory now and peak of a cgroup, v1 or
    v2), pure ``parse_*`` helpers, ``add_cpuacct`` (a v1 cpuacct group where
    ``cpu`` and ``cpuacct`` are separate hierarchies).
``coursehub.meter.records``
    ``UsageRecord`` with ``render_record`` / ``parse_record`` (one JSON line).
``coursehub.meter.gpuread``
    ``GpuReader`` (NVML loaded on first use), ``cgroup_pids``: the GPU memory
    of a cgroup's processes.
``coursehub.meter.bounds``
    ``HostLimits``, ``host_limits``; pure ``bounds_problem`` (counters a unit
    could reach on the host) and ``time_problem`` (times that can be).
``coursehub.meter.journal``
    ``append_record`` (one ``write(2)`` with ``O_APPEND``), ``read_records``
    (``O_NOFOLLOW``, the owner from ``fstat(2)``, line by line with size caps).
``coursehub.meter.sampler``
    ``Sampler`` (open, sample, close units; a thread every ``interval_s``),
    ``record_job_end`` (a runner job's close record).
"""
