"""The names of the late-submission policies and after-due rules, and the words pages show.

Kept apart from :mod:`coursehub.grading.latepolicy` (which subclasses
nbgrader's ``LateSubmissionPlugin``) so that building the command line's
parser imports nothing of nbgrader.
"""

from __future__ import annotations

#: Policy methods, with the words the course page shows.
LATE_METHODS: dict[str, str] = {
    "none": "no penalty",
    "zero": "score 0 when late",
    "per_hour": "points off per hour late",
}
#: What happens to a submission after the due date, with the words the course page shows.
AFTER_DUE: dict[str, str] = {
    "accept": "late submissions accepted, the newest is graded",
    "keep_on_time": "late submissions accepted, an on-time one stays graded",
    "refuse": "hard deadline: no submission after it",
}
