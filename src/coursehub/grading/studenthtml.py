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
still shows the submission: a student's ``<script>`` appears as text.
"""

from __future__ import annotations

from traitlets.config import Config

#: nbconvert's sanitising preprocessor, run by every HTML export of a course's notebooks.
SANITIZER = "nbconvert.preprocessors.sanitize.SanitizeHTML"


def sanitizing_config() -> Config:
    """Return the configuration that sanitises every ``HTMLExporter`` (pure).

    ``HTMLExporter.preprocessors`` are registered enabled after the
    exporter's defaults (nbconvert ``Exporter._init_preprocessors``), so the
    sanitiser sees the notebook as the template will.
    """
    config = Config()
    config.HTMLExporter.preprocessors = [SANITIZER]
    return config
