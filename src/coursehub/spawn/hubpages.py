"""Templates the hub process renders with coursehub's changes (``c.JupyterHub.template_paths``).

``hub_templates/page.html`` extends JupyterHub's own ``page.html`` (JupyterHub's
"Working with templates and UI": ``{% extends "templates/page.html" %}``) and
shows each service of the Services menu by its ``info["display_name"]``
(e.g. "Courses", "Grading: Machine Learning for Mechanics"), falling back to
its name. ``home.html`` and ``not_running.html`` extend JupyterHub's and say,
above its own text, why the server last stopped when the cgroup spawners
know it (``stop_reason``: the whole server killed for memory, with the
course's limit and the peak, :func:`coursehub.spawn.oomreason.server_oom_reason`).
"""

from __future__ import annotations

from importlib import resources


def template_dir() -> str:
    """Return the directory of coursehub's hub templates (for ``JupyterHub.template_paths``)."""
    return str(resources.files("coursehub.spawn").joinpath("hub_templates"))
