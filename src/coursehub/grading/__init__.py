"""nbgrader per course: course directories, the shared exchange, gradebooks, assignments, grades.

Importing this package imports nothing (not nbgrader, not SQLAlchemy).

Public API
----------
``coursehub.grading.layout``
    ``CourseLayout``, ``make_layout``, ``layout_from_env``;
    ``render_course_config``, ``render_student_config``, ``plan_exchange_dirs``
    (pure), ``ensure_course``, ``ensure_gradebook``; ``EXCHANGE_MODES`` (permissions,
    nbgrader#1225).
``coursehub.grading.gradebook``
    ``StudentRecord``, ``plan_gradebook_sync`` (pure), ``apply_gradebook_sync``,
    ``read_roster``, ``read_gradebook``, ``sync_gradebook``.
``coursehub.grading.assignments`` (teacher)
    ``add_assignment``, ``generate_assignment``, ``release_assignment``,
    ``assignment_status`` (fetched / submitted / collected / autograded),
    ``collect``, ``generate_feedback``, ``release_feedback``,
    ``list_assignments``.
``coursehub.grading.exchange`` (student)
    ``fetch_assignment``, ``submit_assignment``, ``fetch_feedback``,
    ``RecordingFetchAssignment``.
``coursehub.grading.create`` (teacher, course page)
    ``check_notebook_upload`` and ``parse_duedate`` (pure), ``create_assignment``
    (from an uploaded notebook or one of the course's material),
    ``set_schedule``.
``coursehub.grading.latepolicy``
    ``LatePolicy``, ``parse_late_policy`` and ``plan_late_penalty`` (pure),
    ``save_late_policy``, ``CourseLatePenalty`` (nbgrader's late-submission plugin).
``coursehub.grading.autograde``
    ``autograde_assignment`` (one runner job per submission, ``parallel``
    at once, resumable), ``load_outcomes``, ``render_outcomes``; the pure
    plans in ``autograde_core`` and ``autograde_batch``.
``coursehub.grading.autograde_progress`` / ``autograde_launch``
    ``read_autograde_progress`` (what the course page shows while it runs),
    ``start_autograde`` (detached, refused while one runs).
``coursehub.grading.export`` / ``moodle``
    ``export_grades_csv`` (nbgrader's CSV), ``read_grade_table``,
    ``render_grade_table``; ``render_moodle_csv`` (Moodle's grade import).
``coursehub.grading.course``
    ``setup_course`` and ``autograde_course_assignment`` (from the catalog).
``coursehub.grading.hubservice``
    ``render_formgrader_config`` (pure), ``register_formgrader`` (run time),
    ``formgrader_url`` (open it in its own tab, nbgrader#1870).
``coursehub.grading.demo``
    ``setup_demo_grading`` (the demo course's released assignment).

Command line: ``coursehub grading ...`` (:mod:`coursehub.grading.cli`).
"""
