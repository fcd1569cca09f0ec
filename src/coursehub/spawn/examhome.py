"""An exam server's ``HOME`` is its exam home, on the local spawners too.

JupyterHub's ``LocalProcessSpawner.get_env`` applies the spawner's
``environment`` first, then ``user_env``, which sets ``HOME`` from the
account's passwd entry (``SimpleLocalProcessSpawner``: from its
``home_dir_template``), so the exam server's ``HOME``
(:func:`coursehub.examroom.server.plan_exam_traits`) was replaced by the
student's course home: ``~`` in a notebook, and the kernel's own ``HOME``,
led back to the course's files. :class:`ExamHomeMixin` puts it back for an
exam server (``COURSEHUB_EXAM`` in its environment) and leaves every other
server as JupyterHub makes it.
"""

from __future__ import annotations

from traitlets import HasTraits

from coursehub.examroom.server import EXAM_VAR


class ExamHomeMixin(HasTraits):
    """Mix in before a ``LocalProcessSpawner`` class: an exam server keeps its exam home."""

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        """JupyterHub's user environment, with ``HOME`` the exam home in an exam server."""
        env = super().user_env(env)  # type: ignore[misc]
        environment = getattr(self, "environment", None) or {}
        if environment.get(EXAM_VAR) and environment.get("HOME"):
            env["HOME"] = str(environment["HOME"])
        return env
