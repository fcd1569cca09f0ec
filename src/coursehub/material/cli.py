"""``coursehub material ...``: a course's git material (set, update, show).

Nothing heavy at module level (``coursehub --help`` stays fast): SQLAlchemy
and the material modules load when a sub-command runs. The schedule is
``coursehub material update --all`` run by cron or a systemd timer
(docs/material.md), so that a web app with several workers never updates
twice.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coursehub.errors import UsageError

if TYPE_CHECKING:
    from coursehub.material.service import UpdateOutcome


def register(subparsers: Any) -> Any:
    """Add ``coursehub material`` with ``set`` and ``show`` to ``subparsers``.

    ``material update`` is a row of its own in :data:`coursehub.cli.COMMANDS`
    (:mod:`coursehub.usecases.material_update`: the update, then the course's book),
    declared with :func:`add_update_arguments`.

    Returns
    -------
    argparse._SubParsersAction
        The sub-commands of ``coursehub material``, for the rows that add to them.
    """
    parser = subparsers.add_parser("material", help="a course's material from git (mirror, update)")
    commands = parser.add_subparsers(dest="material_command", metavar="COMMAND", required=True)
    put = commands.add_parser(
        "set",
        help="set a course's repository, branch, folder and credential",
        description="Set the git repository of a course's material. A private repository's "
        "token (one line TOKEN or USER:TOKEN) or deploy key (SSH private key without "
        "passphrase) is given as a file; it is copied to a private file of this host.",
    )
    put.add_argument("course", metavar="COURSE_ID")
    put.add_argument("--repo", required=True, metavar="URL", help="https://... or git@host:path")
    put.add_argument("--branch", default="main", metavar="B", help="branch (default main)")
    put.add_argument("--subdir", default="", metavar="D", help="folder students get (default all)")
    secret = put.add_mutually_exclusive_group()
    secret.add_argument("--credential", type=Path, metavar="FILE", help="token or deploy key file")
    secret.add_argument("--no-credential", action="store_true", help="forget the credential")
    put.set_defaults(func=run_set)
    show = commands.add_parser("show", help="a course's material and its mirror's state")
    show.add_argument("course", metavar="COURSE_ID")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=run_show)
    for sub in (put, show):
        add_location_arguments(sub)
    return commands


def add_update_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``coursehub material update`` on ``parser``.

    ``COURSE_ID`` (or ``--all``), ``--accept-rewrite``, and the catalog and mirror
    locations (:func:`add_location_arguments`); the caller sets ``func``.
    """
    parser.add_argument("course", metavar="COURSE_ID", nargs="?")
    parser.add_argument("--all", action="store_true", help="every course with a repository")
    parser.add_argument(
        "--accept-rewrite",
        action="store_true",
        help="publish a force-pushed branch (students keep their edits)",
    )
    add_location_arguments(parser)


def add_location_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--database-url`` and ``--material-dir`` (the catalog and the mirrors' folder)."""
    parser.add_argument(
        "--database-url", help="catalog URL (default $COURSEHUB_DATABASE_URL or the data dir's)"
    )
    parser.add_argument(
        "--material-dir",
        type=Path,
        help="mirrors' folder (default $COURSEHUB_MATERIAL_DIR, else DATA_DIR/material)",
    )


@contextmanager
def _sessions(args: argparse.Namespace) -> Iterator[Any]:
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory

    with open_catalog(args.database_url) as engine:
        yield session_factory(engine)


def _layout(args: argparse.Namespace) -> Any:
    from coursehub.material.layout import MaterialLayout, material_root

    return MaterialLayout(args.material_dir or material_root())


def run_set(args: argparse.Namespace) -> int:
    """Record the repository (and credential) of a course."""
    from coursehub.catalog.readmodel import load_course
    from coursehub.material.credential import read_credential_file
    from coursehub.material.service import set_course_material

    credential = read_credential_file(args.credential) if args.credential else None
    layout = _layout(args)
    with _sessions(args) as sessions, sessions() as session:
        course = load_course(session, args.course)
        material = set_course_material(
            session,
            course,
            layout,
            args.repo,
            args.branch,
            args.subdir,
            credential=credential,
            drop_credential=args.no_credential,
        )
        session.commit()
        kind = material.credential or "no credential"
        print(f"{args.course}: {material.git_url} {material.branch} /{material.subpath} ({kind})")
        print(f"publish it now with: coursehub material update {args.course}")
    return 0


def run_update_command(
    args: argparse.Namespace, on_published: Callable[[UpdateOutcome], None] | None = None
) -> int:
    """Update one course's mirror (exit 2 on failure) or every course's (exit 1 if any failed).

    ``on_published`` is called after each good update (:func:`run_update`).
    """
    from coursehub.material.mirrortypes import MaterialError
    from coursehub.material.service import courses_to_update, run_update

    if bool(args.all) == bool(args.course):
        raise UsageError("name one COURSE_ID, or --all")
    layout = _layout(args)
    with _sessions(args) as sessions:
        if args.all:
            with sessions() as session:
                course_ids = courses_to_update(session)
        else:
            course_ids = [args.course]
        failed = 0
        for course_id in course_ids:
            outcome = run_update(
                sessions, course_id, layout, args.accept_rewrite, on_published=on_published
            )
            if not outcome.ok and not args.all:
                raise MaterialError(f"{course_id}: {outcome.message}")
            failed += not outcome.ok
            print(f"{course_id}: {'ok' if outcome.ok else 'error'}: {outcome.message}")
            if outcome.first_publication:
                print(f"{course_id}: first publication: run 'coursehub hub sync' for new servers")
    return 1 if failed else 0


def run_show(args: argparse.Namespace) -> int:
    """Print a course's material, its mirror's state and the students' pull link."""
    from coursehub.catalog.material import render_state
    from coursehub.catalog.readmodel import load_course
    from coursehub.material.layout import plan_unreachable

    layout = _layout(args)
    with _sessions(args) as sessions, sessions() as session:
        state = render_state(load_course(session, args.course))
    if args.json:
        print(json.dumps(state, indent=1))
        return 0
    if state["repo"] is None:
        print(f"{args.course}: no repository (coursehub material set {args.course} --repo URL)")
        return 0
    for key in ("repo", "branch", "subdir", "credential", "state", "last_update_at", "commit"):
        print(f"{key:15} {state[key] if state[key] not in (None, '') else '-'}")
    print(f"{'error':15} {state['error'] or '-'}")
    print(f"{'pull_url':15} {state['pull_url'] or '- (no good update yet)'}")
    blocked = plan_unreachable(layout.published)
    if blocked:
        print(f"warning: students cannot traverse {', '.join(map(str, blocked))} (chmod o+x)")
    return 0
