"""Forms of the course's assignment pages: create an assignment, change its due date and policy.

Each carries its CSRF token (Flask-WTF); the fields' shapes are checked
here, their meaning (a safe name, a real notebook with nbgrader cells, a
known time zone, a valid policy) by :mod:`coursehub.grading.create` and
:mod:`coursehub.grading.latepolicy`, whose messages are shown next to the
form.
"""

from __future__ import annotations

from flask_wtf import FlaskForm
from flask_wtf.file import FileField
from wtforms import SelectChoice, SelectField, StringField
from wtforms.validators import DataRequired, Length, Optional

from coursehub.grading.latepolicy import AFTER_DUE, LATE_METHODS, LatePolicy, parse_late_policy


class ScheduleForm(FlaskForm):
    """Due date (local time in a zone) and late-submission policy of an assignment."""

    duedate = StringField(
        "Due date",
        validators=[Optional(), Length(max=32)],
        render_kw={"type": "datetime-local"},
    )
    timezone = StringField("Time zone", validators=[DataRequired(), Length(max=64)])
    late_method = SelectField(
        "Late submissions",
        choices=[SelectChoice(key, text) for key, text in LATE_METHODS.items()],
    )
    points_per_hour = StringField(
        "Points off per hour late", validators=[Optional(), Length(max=16)]
    )
    after_due = SelectField(
        "After the due date",
        choices=[SelectChoice(key, text) for key, text in AFTER_DUE.items()],
        validators=[Optional()],
    )

    def policy(self) -> LatePolicy:
        """Return the late policy of the form (UsageError when it is not a valid one)."""
        return parse_late_policy(
            self.late_method.data or "none", self.points_per_hour.data, self.after_due.data
        )


class NewAssignmentForm(ScheduleForm):
    """A new assignment: its name, its notebook (uploaded or from the material), its schedule."""

    assignment = StringField("Assignment name", validators=[DataRequired(), Length(max=64)])
    notebook = FileField("Source notebook (.ipynb with nbgrader cells)")
    material = SelectField("Or a notebook of the course's material", validators=[Optional()])
