"""The course catalog: years, portals, courses, people, roles, resource profiles.

No Flask here and no torch; importing this package imports nothing (not even
SQLAlchemy): import the sub-modules you need.

Public API (names are stable; the web app, ``hub sync`` and nbgrader use them)
-----------------------------------------------------------------------------
``coursehub.catalog.models``
    ``Base`` (metadata with ``NAMING_CONVENTION``), ``AcademicYear``,
    ``Portal``, ``Course``, ``CourseGroup``, ``Person``, ``Membership``,
    ``ResourceProfile``, ``CourseMaterial``; ``Role`` (lead, teacher, grader,
    student), ``TEAM_ROLES``, ``GroupKind`` (TD, TP): ``Membership.role`` and
    ``CourseGroup.kind`` hold these enums (stored as their string values).
    ``Course.memberships``, ``Person.memberships`` and
    ``CourseGroup.memberships`` are write-only: select them explicitly.
    Integer keys are ``id``,
    foreign keys ``*_pk``; ``Course.course_id`` is nbgrader's course id
    (``"mlmeca-2025"``), hub groups are ``nbgrader-{course_id}`` (students)
    and ``formgrade-{course_id}`` (``TEAM_ROLES``).
``coursehub.catalog.db``
    ``database_url()`` (``COURSEHUB_DATABASE_URL``, default
    ``sqlite:///<data_dir>/catalog.sqlite``), ``data_dir()``
    (``COURSEHUB_DATA_DIR``, else ``$XDG_DATA_HOME/coursehub``, else
    ``~/.local/share/coursehub``), ``make_engine(url)``,
    ``session_factory(engine)``, ``session_scope(engine)``.
``coursehub.catalog.schema``
    ``upgrade_database(engine)``, ``check_schema(engine)`` (raises
    ``SchemaError`` naming ``coursehub db upgrade``), ``current_revision``,
    ``head_revision``.
``coursehub.catalog.courses``
    ``create_year``, ``get_year``, ``list_years``, ``set_year_active``,
    ``parse_year_label``;
    ``create_portal``, ``get_portal``, ``list_portals``; ``make_course_id``,
    ``create_course``, ``get_course`` (by ``course_id``), ``list_courses``,
    ``update_course``, ``archive_course``, ``record_sync``; ``add_group``,
    ``get_group``, ``remove_group``, ``check_group_name``, ``parse_group_kind``;
    ``set_material``; ``catalog_tree`` (years -> portals -> courses).
``coursehub.catalog.admin``
    ``ensure_year``, ``set_current_year``, ``current_year``, ``archive_year``,
    ``next_year_label``; ``ensure_portal``, ``rename_portal``, ``add_manager``,
    ``remove_manager``, ``managed_portals``, ``is_manager``; ``open_course``
    (a known lead, an open year), ``archive_course``, ``check_writable`` /
    ``ReadOnlyError`` (archived course or year), ``creation_refusal``.
``coursehub.catalog.rollover``
    ``copy_course``, ``rollover`` (idempotent), pure ``plan_rollover`` and
    ``render_steps``; the files go with ``coursehub.admin.carry``.
``coursehub.catalog.readmodel``
    A course as pages and the API show it, each in one bounded query:
    ``load_course`` (with year, portal, profile, material), ``load_own``,
    ``load_groups`` -> ``CourseGroups`` (rows with counts, names by id),
    ``load_team``, ``load_students`` (a page of ``PAGE_SIZE``, or all),
    ``load_members``, ``load_member``, ``count_members``; rows are
    ``MemberRow``, ``GroupRow``, ``OwnRow``; ``plan_pages``.
``coursehub.catalog.rules``
    ``Actor``, ``SYSTEM``, ``IDENTITY_FIELDS``; pure ``identity_changes``,
    ``may_change_identity`` (identity belongs to the person: only an admin
    changes that of someone not only in the caller's course) and
    ``check_role_change`` (a course keeps a lead; leads and admins make leads).
``coursehub.catalog.text``
    ``is_forbidden_char``, ``control_char_problem``, ``quote_text``: the
    control characters no stored value may hold.
``coursehub.catalog.people``
    ``normalize_username``, ``check_username``, ``check_email``,
    ``check_identity``, ``parse_role``; ``ensure_person``, ``get_person``, ``find_person``,
    ``search_people`` (find a person across courses), ``courses_of`` (their
    courses, ``PersonCourse``), ``person_roles``; ``add_member``,
    ``remove_member`` (both take ``actor=``), ``course_leads``, ``get_membership``,
    ``role_in``, ``is_team``,
    ``visible_courses`` (all for an admin, else the user's courses).
``coursehub.catalog.profiles``
    ``create_profile``, ``get_profile``, ``list_profiles``,
    ``update_profile``, ``delete_profile``, ``check_profile_values``.
``coursehub.catalog.roster``
    ``parse_roster(data, username_rule="student_id") -> list[RosterRow]``
    (pure; ``USERNAME_RULES``: ``student_id``, ``email-local``).
``coursehub.catalog.enrolment``
    ``plan_roster(session, course, rows, mode="add"|"sync", group=None) ->
    RosterPlan`` (``additions``, ``updates``, ``removals``, ``unchanged``,
    ``new_groups``, ``identity_changes``), ``plan_changes`` (its pure core),
    ``render_plan(plan) -> str`` (:mod:`coursehub.catalog.preview`),
    ``apply_roster(session, plan)`` (one transaction, commits; database
    errors become messages without values, :mod:`coursehub.catalog.dberrors`),
    ``check_confirmed``, ``import_roster(session, course_id, data, ...,
    admin=False, confirm=False)``.
``coursehub.catalog.seed``
    ``seed_demo(session) -> Course``.
``coursehub.catalog.errors``
    ``ValidationError`` (a ``UsageError``), ``NotFoundError``,
    ``ConflictError``, ``IdentityError`` (a ``ConflictError``),
    ``ForbiddenError``, ``SchemaError``, ``RosterError`` (``.problems``), all
    ``CoursehubError``.

Transactions: service functions flush and never commit; the caller commits
(one request, one transaction). ``apply_roster`` is the exception: it
commits, or rolls back everything and re-raises.

Command line: ``coursehub db upgrade|current|seed`` and ``coursehub roster
import`` (:mod:`coursehub.catalog.cli`); ``coursehub year|portal|course``
(:mod:`coursehub.admin.cli`).
"""
