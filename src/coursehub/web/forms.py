"""The web forms (Flask-WTF): each carries its CSRF token and checks its fields' shape.

Domain rules (a unique code, a known role, a valid memory size) stay in the
catalog's services; their errors are shown next to the field they name.
"""

from __future__ import annotations

from flask_wtf import FlaskForm
from flask_wtf.file import FileAllowed, FileField, FileRequired
from wtforms import (
    DecimalField,
    HiddenField,
    IntegerField,
    SearchField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import (
    DataRequired,
    InputRequired,
    Length,
    NumberRange,
    Optional,
    ValidationError,
)

from coursehub.catalog.models.courses import GroupKind, Role


class ProfileSelectField(SelectField):
    """A menu of the resource profiles; a posted name not among them is refused, named."""

    def pre_validate(self, form: object) -> None:
        """Refuse a value not in the menu with one line naming the field and the value.

        Raises
        ------
        wtforms.validators.ValidationError
            ``"Team resource profile: no resource profile 'huge'"``.
        """
        if self.data not in {choice[0] for choice in self.iter_choices()}:
            raise ValidationError(f"{self.label.text}: no resource profile {self.data!r}")


class CourseForm(FlaskForm):
    """Create or edit a course; ``code`` and ``year`` are fixed once the course exists."""

    code = StringField("UE code", validators=[DataRequired(), Length(max=32)])
    year = SelectField("Academic year", validators=[DataRequired()])
    portal = SelectField("Portal", validators=[DataRequired()])
    title = StringField("Title", validators=[DataRequired(), Length(max=300)])
    description = TextAreaField("Description", validators=[Optional(), Length(max=5000)])
    profile = ProfileSelectField("Resource profile", validators=[Optional()])
    team_profile = ProfileSelectField("Team resource profile", validators=[Optional()])
    lead = StringField("Lead (hub username)", validators=[Optional(), Length(max=128)])
    git_url = StringField("Material: git repository URL", validators=[Optional(), Length(max=500)])
    branch = StringField("Branch", default="main", validators=[Optional(), Length(max=200)])
    subpath = StringField("Folder in the repository", validators=[Optional(), Length(max=500)])


class GroupForm(FlaskForm):
    """Add a TD or TP sub-group to a course."""

    name = StringField("Group name", validators=[DataRequired(), Length(max=32)])
    kind = SelectField("Kind", choices=[SelectChoice(k.value) for k in GroupKind])


class MemberForm(FlaskForm):
    """Add a person to a course, or change their role or group."""

    username = StringField("Hub username", validators=[DataRequired(), Length(max=128)])
    role = SelectField("Role", choices=[SelectChoice(r.value) for r in Role])
    group = SelectField("Group", validators=[Optional()])
    first_name = StringField("First name", validators=[Optional(), Length(max=200)])
    last_name = StringField("Last name", validators=[Optional(), Length(max=200)])
    email = StringField("E-mail", validators=[Optional(), Length(max=320)])


class RosterUploadForm(FlaskForm):
    """Upload a roster CSV to preview its effect."""

    roster = FileField(
        "Roster file (CSV)",
        validators=[FileRequired("choose a CSV file"), FileAllowed(["csv", "txt"], "a .csv file")],
    )
    mode = SelectField(
        "Students missing from the file",
        choices=[
            SelectChoice("add", "keep them (add and update only)"),
            SelectChoice("sync", "remove them from the course"),
        ],
    )
    group = StringField("Put every student in group", validators=[Optional(), Length(max=32)])
    username_rule = SelectField(
        "Hub username",
        choices=[
            SelectChoice("student_id", "the student number"),
            SelectChoice("email-local", "the e-mail before @"),
        ],
    )


class RosterConfirmForm(FlaskForm):
    """Confirm a previewed roster: the file comes back signed, with the digest of its plan."""

    payload = HiddenField(validators=[DataRequired()])


class ProfileForm(FlaskForm):
    """Create or edit a resource profile (admins)."""

    name = StringField("Name", validators=[DataRequired(), Length(max=64)])
    cpu_limit = DecimalField("CPU limit (CPUs)", places=None, validators=[InputRequired()])
    mem_limit = StringField("Memory limit (e.g. 4G)", validators=[DataRequired(), Length(max=32)])
    n_threads = IntegerField("Threads per process", validators=[Optional(), NumberRange(min=1)])
    gpus = IntegerField(
        "GPUs per user", default=0, validators=[InputRequired(), NumberRange(min=0)]
    )
    jobs_per_gpu = IntegerField(
        "Jobs sharing one GPU", default=1, validators=[InputRequired(), NumberRange(min=1)]
    )
    gpu_mem_limit = StringField("GPU memory per job", validators=[Optional(), Length(max=16)])
    partition = StringField("Slurm partition", validators=[Optional(), Length(max=64)])
    account = StringField("Slurm account", validators=[Optional(), Length(max=64)])
    qos = StringField("Slurm QOS", validators=[Optional(), Length(max=64)])


class SearchForm(FlaskForm):
    """Find a person by username, name, e-mail or student number (a GET form)."""

    class Meta:
        csrf = False

    q = SearchField("Name, username, e-mail or student number", validators=[Length(min=2, max=100)])
