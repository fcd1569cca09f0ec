"""Collect an exam: each student's receipted submission, nothing submitted around the exam.

A student can always run nbgrader's own submit (the Lab's Submit button, or
``nbgrader submit`` in a terminal): such a submission lands in the inbound
without passing :func:`coursehub.grading.examsubmit.plan_exam_submit`, after
their end included, and nbgrader's collect would take it as the newest. For
an exam, :class:`ExamCollect` (coursehub's
:class:`coursehub.grading.collect.VerifiedCollect`, with its owner, link and
size checks) takes for each student the one folder named in their receipt
(:attr:`coursehub.catalog.exams.Sitting.submission`) and skips every other,
reported as skipped with the reason; a student without a receipt is not
collected. :func:`collect_exam` runs it on the course, with the receipts
read from the catalog by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from traitlets import Dict

from coursehub.errors import CoursehubError
from coursehub.grading.assignments import nbgrader_config, skipped_submissions
from coursehub.grading.collect import VerifiedCollect
from coursehub.grading.layout import CourseLayout, secure_course

#: The class nbgrader's ``ExchangeFactory.collect`` names for an exam's collect.
EXAM_COLLECT_CLASS = "coursehub.grading.examcollect.ExamCollect"


class ExamCollect(VerifiedCollect):
    """VerifiedCollect keeping, per student, only the submission their receipt names."""

    receipted = Dict({}, help="student id -> the inbound folder named in their exam receipt").tag(
        config=True
    )

    def select_records(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Keep each student's receipted submission; report the others as rejected."""
        kept = []
        for record in records:
            if self.receipted.get(record["username"]) == record["filename"]:
                kept.append(record)
                continue
            reason = "has no exam receipt (not submitted through the exam, or after its end)"
            self.rejected.append((record["filename"], reason))
            self.log.warning("Skipping submission %s: it %s", record["filename"], reason)
        return kept


def collect_exam(layout: CourseLayout, assignment: str, receipts: Mapping[str, str]) -> list[str]:
    """Collect each student's receipted submission of ``assignment``; return what was skipped.

    ``receipts``: ``{student id: inbound folder name}`` of the students who
    have a receipt. Returns the skipped submissions with their reason, one a
    line (:func:`coursehub.grading.assignments.skipped_submissions`).

    Raises
    ------
    CoursehubError
        When nbgrader's collect fails, with its last line.
    """
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = nbgrader_config(layout)
    config.ExchangeFactory.collect = EXAM_COLLECT_CLASS
    config.ExamCollect.receipted = dict(receipts)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result = api.collect(assignment) or {"success": False, "error": "not available"}
    secure_course(layout)
    if not result.get("success"):
        lines = [x.strip() for x in str(result.get("error") or "").splitlines() if x.strip()]
        reason = lines[-1] if lines else "no message"
        raise CoursehubError(
            f"could not collect exam {assignment} of course {layout.course_id}: {reason}"
        )
    return skipped_submissions(str(result.get("log", "")))
