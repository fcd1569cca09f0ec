"""What a student's notebook may put into a teacher's page: HTML sanitised, never a script.

The manual grading page of the formgrader (nbgrader's ``SubmissionHandler``)
and the feedback files (nbgrader's ``generate_feedback``) are nbconvert's
HTML export of the autograded notebook: its outputs were produced by the
student's code, its markdown cells written by the student. nbconvert writes
a ``text/html`` or ``text/markdown`` output, a markdown cell's raw HTML and an
``application/javascript`` output into the page as they are
(``nbconvert/templates/classic/base.html.j2``), and nbgrader's ``formgrade``
template renders markdown cells itself, without nbconvert's
``HTMLExporter.sanitize_html``. So every HTML export of a course runs
nbconvert's own ``SanitizeHTML`` preprocessor
(https://nbconvert.readthedocs.io/en/latest/config_options.html, ``SanitizeHTML``:
bleach's allow-list of tags and attributes, disallowed tags escaped into
text; outputs of other types than text, LaTeX, JSON, PNG and JPEG, e.g.
``application/javascript``, widgets, ``image/svg+xml``, removed). The page
still shows the submission: a student's ``<script>`` appears as text. The
student's names in the page's header are escaped too (:class:`SanitizeSubmission`).
"""

from __future__ import annotations

import html
from typing import Any

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets.config import Config

#: The sanitising preprocessor run by every HTML export of a course's notebooks.
SANITIZER = "coursehub.grading.studenthtml.SanitizeSubmission"
#: Resources nbgrader's ``formgrade`` template writes unescaped (``formgrade_macros.html.j2``):
#: the student's id and names, which come from the roster.
STUDENT_RESOURCES = ("student", "first_name", "last_name")


def escape_student_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """Return ``resources`` with the student's id and names HTML-escaped (pure, a copy)."""
    escaped = dict(resources)
    for key in STUDENT_RESOURCES:
        if isinstance(escaped.get(key), str):
            escaped[key] = html.escape(escaped[key])
    return escaped


class SanitizeSubmission(SanitizeHTML):
    """nbconvert's ``SanitizeHTML``, and the student's names escaped in the page's header.

    nbgrader's manual grading page passes the student's id, first and last
    name (from the roster, "assumed to be crafted": docs/security.md) to its
    template in ``resources``, which writes them as they are.
    """

    def preprocess(self, nb: Any, resources: Any) -> Any:
        """Sanitise the cells (``SanitizeHTML``), escape :data:`STUDENT_RESOURCES`."""
        nb, resources = super().preprocess(nb, resources)
        for key, value in escape_student_resources(dict(resources)).items():
            if key in STUDENT_RESOURCES:
                resources[key] = value
        return nb, resources


def sanitizing_config() -> Config:
    """Return the configuration that sanitises every ``HTMLExporter`` (pure).

    ``HTMLExporter.preprocessors`` are registered enabled after the
    exporter's defaults (nbconvert ``Exporter._init_preprocessors``), so the
    sanitiser sees the notebook as the template will.
    """
    config = Config()
    config.HTMLExporter.preprocessors = [SANITIZER]
    return config
