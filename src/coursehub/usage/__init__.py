"""Usage reports for people: ``coursehub usage``, the course page's Usage view, Prometheus.

Reads the catalog's usage tables (:mod:`coursehub.catalog.models.usage`), which the
hub and the runner fill through their usage files (:mod:`coursehub.meter`).
See docs/usage.md.

Modules
-------
``coursehub.usage.report``
    ``usage_report`` (grouped by student, day or course), ``render_table``,
    ``render_csv``, ``render_json``, ``parse_since``.
``coursehub.usage.cli``
    ``coursehub usage ingest|report|prune``.
``coursehub.usage.metrics``
    Prometheus exposition of per-course series (``render_metrics``).
``coursehub.usage.idlegpu``
    Servers holding a GPU with no kernel busy (``plan_idle_gpu_servers``).
``coursehub.usage.yearly``
    CPU- and GPU-hours per course and portal for a year, CSV.
``coursehub.usage.chart``
    A per-day bar chart as inline SVG (``render_bar_svg``).
"""
