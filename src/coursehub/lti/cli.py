"""``coursehub lti keygen|jwks|passback|requests|bind``: the tool's key pair, grades to the LMS
gradebook, and a hub admin's confirmation of LMS accounts (docs/lti.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

KEY_HELP = (
    "the tool's private key (default: $COURSEHUB_LTI_TOOL_KEY, else <data dir>/lti/tool-key.pem)"
)


def register(subparsers: Any) -> None:
    """Add ``coursehub lti keygen|jwks|passback|requests|bind`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "lti", help="LTI Advantage: the tool's key pair, grade passback to the LMS"
    )
    commands = parser.add_subparsers(dest="lti_command", metavar="COMMAND", required=True)
    keygen = commands.add_parser("keygen", help="make the tool's RSA key pair (private, 0600)")
    keygen.add_argument("--force", action="store_true", help="replace an existing key")
    jwks = commands.add_parser("jwks", help="print the tool's public key set (JSON)")
    passback = commands.add_parser(
        "passback", help="send an assignment's nbgrader scores to the LMS gradebook (AGS)"
    )
    passback.add_argument("course", metavar="COURSE_ID")
    passback.add_argument("assignment", metavar="ASSIGNMENT")
    passback.add_argument(
        "--link", metavar="CODE", help="the LMS link, when the course has several"
    )
    passback.add_argument(
        "--zero-missing", action="store_true", help="send 0 to students who submitted nothing"
    )
    passback.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
    for sub, func in ((keygen, run_keygen), (jwks, run_jwks), (passback, run_passback)):
        sub.add_argument("--key", type=Path, help=KEY_HELP)
        sub.set_defaults(func=func)
    requests = commands.add_parser(
        "requests", help="list the LMS accounts refused for naming an existing hub account"
    )
    bind = commands.add_parser(
        "bind", help="confirm (as a hub admin) that a refused LMS account is the account it named"
    )
    bind.add_argument("request", metavar="NUMBER", type=int, help="from `coursehub lti requests`")
    for sub, func in ((requests, run_requests), (bind, run_bind)):
        sub.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
        sub.set_defaults(func=func)


def run_keygen(args: argparse.Namespace) -> int:
    """Make the key pair and say what to register in the LMS."""
    from coursehub.lti.keys import generate_key, tool_key_path

    path = generate_key(args.key or tool_key_path(), replace=args.force)
    print(f"tool key written to {path} (mode 600)")
    print(
        "register the key set URL https://HUB/services/coursehub/api/v1/lti/jwks.json in the "
        "LMS tool (Public key type: Keyset URL)"
    )
    return 0


def run_jwks(args: argparse.Namespace) -> int:
    """Print the public key set."""
    from coursehub.lti.keys import load_private_key, public_jwks, tool_key_path

    print(json.dumps(public_jwks(load_private_key(args.key or tool_key_path())), indent=2))
    return 0


def run_passback(args: argparse.Namespace) -> int:
    """Send the scores; exit 1 when a student's score failed."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.db import session_scope
    from coursehub.grading.layout import layout_from_env
    from coursehub.lti.passback import FAILED, apply_passback, render_report

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        course = get_course(session, args.course)
        report = apply_passback(
            session,
            course,
            layout_from_env(course.course_id),
            args.assignment,
            link_code=args.link,
            zero_missing=args.zero_missing,
            key_path=args.key,
        )
    print(render_report(report))
    return 1 if report.count(FAILED) else 0


def run_requests(args: argparse.Namespace) -> int:
    """Print the account requests, one a line: number, account, LMS name and e-mail, course."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.lti.accounts import account_requests

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        for rq in account_requests(session):
            course = rq.link.course if rq.link is not None else None
            where = course.course_id if course is not None else "-"
            print(
                f"{rq.id}\t{rq.username}\t{rq.name or '-'}\t{rq.email or '-'}\t{where}"
                f"\t{rq.issuer}\t{rq.requested_at:%Y-%m-%d %H:%M} UTC"
            )
    return 0


def run_bind(args: argparse.Namespace) -> int:
    """Bind a request's LMS account to the account it named (a hub admin's confirmation)."""
    import getpass

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.lti.accounts import get_account_request
    from coursehub.catalog.lti.confirm import confirm_account_request

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        request = get_account_request(session, args.request)
        lms_user = f"LMS account {request.subject} of {request.issuer}"
        person = confirm_account_request(
            session, request, f"{getpass.getuser()} (cli)", admin=True, course=None
        )
        print(f"{lms_user} bound to {person.username}")
    return 0
