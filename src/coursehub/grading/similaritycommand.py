"""``coursehub exam similarity``: the similarity report of a collected assignment.

The comparison: :mod:`coursehub.grading.similarity`; the command line:
:mod:`coursehub.grading.examcli`.
"""

from __future__ import annotations

import argparse

from coursehub.errors import UsageError
from coursehub.grading.examcommands import cli_options


@cli_options
def similarity(args: argparse.Namespace) -> int:
    """``coursehub exam similarity``: print the near-identical pairs; write the HTML report."""
    from coursehub.atomicfile import write_atomically
    from coursehub.catalog.examjson import integer_field
    from coursehub.grading.layout import layout_from_env, secure_course
    from coursehub.grading.similarity import (
        find_similar,
        given_code,
        render_report,
        submitted_code,
    )

    percent = integer_field({"threshold": args.threshold}, "threshold")
    if not 1 <= percent <= 100:
        raise UsageError(f"--threshold: must be 1 to 100 (percent), got {percent}")
    layout = layout_from_env(args.course_id)
    given = given_code(layout.course_dir, args.assignment)
    codes = submitted_code(layout.course_dir, args.assignment, given)
    pairs = find_similar(codes, given.values(), threshold=percent / 100)
    report = args.html or layout.reports_dir / f"similarity-{args.assignment}.html"
    write_atomically(report, render_report(args.assignment, pairs, codes), 0o600)
    if args.html is None:
        secure_course(layout)  # the team's group may read the course's reports
    compared = len(codes) * (len(codes) - 1) // 2
    print(
        f"{args.assignment} of {layout.course_id}: {len(codes)} submission(s) with code of "
        f"their own, {compared} pair(s) compared, {len(pairs)} at or above {percent} %"
    )
    for pair in pairs:
        print(
            f"  {pair.first} and {pair.second}: {pair.shares[0]:.0%} and {pair.shares[1]:.0%} "
            f"({pair.shared_tokens} tokens shared)"
        )
    print(f"report: {report}")
    return 0
