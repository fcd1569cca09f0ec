"""Usage reports for people: ``coursehub usage``, the course page's Usage view, Prometheus.

Reads the catalog's usage tables (:mod:`coursehub.catalog.models.usage`), which the
hub and the runner fill through their usage files (:mod:`coursehub.meter`).
See docs/usage.md.

Its modules and what each holds: docs/architecture.md.
"""
