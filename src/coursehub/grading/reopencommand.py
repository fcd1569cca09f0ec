"""``coursehub exam reopen``: start a student's exam server again after a crash.

::

    coursehub exam reopen mlmeca-2025 final --student p2500001 [--by LEAD] \\
        [--hub-url URL] [--token-env VAR]

The catalog is checked first (:func:`coursehub.catalog.examproctor.check_reopen`:
started, not submitted at the bell, end not reached; the end is not moved),
then the hub stops what is left of the student's servers and starts their
exam server again (:mod:`coursehub.grading.examreopen`), and the reopen is
recorded as an exam event (``server-reopened``, by ``--by`` or the account
running the command). The hub's API URL and token are those of ``coursehub
hub sync`` (:func:`coursehub.hub.hubclient.client_from_env`), with
``admin:servers`` and ``read:users``. A refusal is one line naming the
option (status 2); a hub that refuses or does not answer is one line
(status 1) and nothing is recorded.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from coursehub.grading.examcommands import _recorder, cli_options, course_exam, exam_transaction


def add_reopen_arguments(sub: argparse.ArgumentParser) -> None:
    """Declare ``reopen``'s options on ``sub``: those of ``exam end``, and the hub's."""
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--student", required=True, metavar="USER")
    sub.add_argument("--by", metavar="USER", help="a lead of the course (default: you)")
    sub.add_argument("--hub-url", help="hub base or API URL (default: $COURSEHUB_HUB_API_URL)")
    sub.add_argument(
        "--token-env", metavar="VAR", help="environment variable holding the hub API token"
    )


@cli_options
def reopen(args: argparse.Namespace) -> int:
    """``coursehub exam reopen``: start a student's exam server again; print what the hub did.

    Returns 0 when reopened, 1 when the hub refused or did not answer.
    Raises :class:`coursehub.errors.UsageError` (status 2) naming the option
    of a refusal, :class:`coursehub.catalog.errors.NotFoundError` for an
    unknown course or exam.
    """
    from coursehub.catalog.examproctor import check_reopen
    from coursehub.catalog.examtime import format_moment
    from coursehub.grading.examreopen import reopen_exam
    from coursehub.hub.hubclient import HubError, HubUnreachableError, client_from_env

    moment = datetime.now(UTC)
    try:
        with exam_transaction(args) as session:
            course, exam = course_exam(session, args)
            by = _recorder(session, course, args.by)
            check_reopen(session, course, exam, args.student, moment)
            with client_from_env(args.hub_url, args.token_env) as client:
                done = reopen_exam(session, course, exam, args.student, by, moment, client)
    except (HubError, HubUnreachableError) as exc:
        print(f"--student: the hub did not reopen {args.student}'s server: {exc}", file=sys.stderr)
        return 1
    assert done.sitting.ends_at is not None
    print(
        f"{done.sitting.username}'s exam server for {exam.assignment} reopened by {by}: "
        f"{done.outcome}; ends {format_moment(done.sitting.ends_at, exam.timezone)} as before"
    )
    return 0
