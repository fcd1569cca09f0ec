"""Usage metering on the hub and runner side: what a server or a job used, as JSON lines.

This package is loaded by every process that starts work (the hub process
through the cgroup spawners, the runner at a job's end). It never imports the
catalog: it writes append-only JSON-lines files in a usage folder, which the
course app (``coursehub usage ingest``, :mod:`coursehub.catalog.usage.ingest`)
reads into the catalog. See docs/usage.md.

Its modules and what each holds: docs/architecture.md.
"""
