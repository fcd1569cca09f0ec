"""The ``nbgrader_config.py`` of the students' servers: what nbgrader does on their side.

One file for every course (``/etc/jupyter/nbgrader_config.py`` in the
single-user image): the shared exchange, the hub's group-based course list,
coursehub's fetch, submit and list classes, the submission limits.
"""

from __future__ import annotations

from pathlib import Path

from coursehub.grading.limits import render_limits_config

#: The students' submit: deadline rule, limits, atomic, private (coursehub.grading.exchange).
SUBMIT_CLASS = "coursehub.grading.exchange.PrivateSubmit"
#: The students' list: submission times in the course's zone (coursehub.grading.studentlist).
LIST_CLASS = "coursehub.grading.studentlist.ZonedList"


def render_student_config(
    exchange_root: str | Path, single_user: bool = False, timezone: str = "UTC"
) -> str:
    """Return the global ``nbgrader_config.py`` of the students' servers (pure).

    Install it as ``/etc/jupyter/nbgrader_config.py`` in the single-user
    image. The hub plugin makes nbgrader list only the courses of the
    user's ``nbgrader-{course_id}`` / ``formgrade-{course_id}`` groups; the
    fetch class records each fetch for the course page; the list
    (:data:`LIST_CLASS`, the Lab's Assignment List) shows submission times
    in each assignment's zone, else in ``timezone`` (an IANA name, the
    course's ``COURSEHUB_GRADING_TIMEZONE``); they are recorded in UTC.
    With ``single_user`` (every server runs as one Unix user, as in the
    demo), submissions are named after the hub user (``JUPYTERHUB_USER``)
    instead of the Unix user.
    """
    text = (
        "# nbgrader configuration of every user server (written by coursehub).\n"
        "from nbgrader.auth import JupyterHubAuthPlugin\n\n"
        "c = get_config()  # noqa: F821\n"
        f"c.Exchange.root = {str(exchange_root)!r}\n"
        "c.Exchange.path_includes_course = True\n"
        "c.Authenticator.plugin_class = JupyterHubAuthPlugin\n"
        "c.ExchangeFactory.fetch_assignment = "
        "'coursehub.grading.exchange.RecordingFetchAssignment'\n"
        f"c.ExchangeFactory.submit = {SUBMIT_CLASS!r}\n"
        "# submission times shown in the course's zone (recorded in UTC)\n"
        f"c.ExchangeFactory.list = {LIST_CLASS!r}\n"
        f"c.ExchangeList.timezone = {timezone!r}\n"
    )
    text += "\n".join(render_limits_config()) + "\n"
    if single_user:
        text += (
            "# One Unix user for every server: name submissions after the hub user.\n"
            "import os\n\n"
            "c.CourseDirectory.student_id = os.environ.get('JUPYTERHUB_USER', '*')\n"
        )
    return text
