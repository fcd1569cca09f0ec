"""The error of a failed course environment build (:mod:`coursehub.courseenv.build`)."""

from __future__ import annotations

from coursehub.errors import CoursehubError


class EnvBuildError(CoursehubError):
    """A build failed; the previous environment is kept. The message names the course and log."""
