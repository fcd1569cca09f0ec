"""``coursehub doctor``: every check of this package, one line each (docs/doctor.md).

Exit status 0 when no check fails (warnings and skipped checks included), 1
when one fails; ``--json`` prints the same results for machines.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from coursehub.doctor.result import CheckResult


def register(subparsers: Any) -> None:
    """Add ``coursehub doctor`` to ``subparsers``."""
    from coursehub.hub.render import HubSettings

    parser = subparsers.add_parser(
        "doctor", help="check what would break here: catalog, sandbox, hub, disks (docs/doctor.md)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
    parser.add_argument("--hub-url", help="the hub's API URL (default: $COURSEHUB_HUB_API_URL)")
    parser.add_argument(
        "--homes",
        metavar="HOMES",
        type=Path,
        help="the folder of homes (default: $COURSEHUB_HOMES_DIR or /home)",
    )
    parser.add_argument(
        "--lti",
        metavar="FILE",
        help="the LMS registrations the hub is configured with (hub config --lti)",
    )
    parser.add_argument(
        "--bind-url",
        default=HubSettings.bind_url,
        help="the hub's --bind-url (default: %(default)s)",
    )
    parser.add_argument("--public-url", metavar="URL", default="", help="the hub's --public-url")
    parser.set_defaults(func=run)


def run_checks(args: argparse.Namespace) -> list[CheckResult]:
    """Run every check in report order; return their results."""
    from coursehub.doctor.backupcheck import check_backup
    from coursehub.doctor.budgets import check_budgets
    from coursehub.doctor.catalogcheck import check_catalog, check_clock
    from coursehub.doctor.homes import check_homes
    from coursehub.doctor.host import (
        check_cgroups,
        check_data_disk,
        check_jupyter_start,
        check_sandbox,
        check_slurm,
    )
    from coursehub.doctor.hubcheck import check_hub, check_lti
    from coursehub.doctor.result import thresholds_from_env
    from coursehub.doctor.slurmjobs import check_slurm_watch
    from coursehub.homequota.survey import homes_dir
    from coursehub.settings import data_dir

    limits = thresholds_from_env()
    url = args.database_url
    return [
        check_catalog(url),
        check_clock(url, limits.clock_skew_s),
        check_sandbox(),
        check_cgroups(),
        check_jupyter_start(),
        check_hub(args.hub_url),
        check_slurm(timeout_s=limits.slurm_timeout_s),
        check_slurm_watch(timeout_s=limits.slurm_timeout_s),
        check_data_disk(data_dir(), limits.disk_warn, limits.disk_fail),
        check_homes(url, args.homes or homes_dir(), limits.quota_warn, limits.named),
        check_lti(args.lti, args.bind_url, args.public_url),
        check_budgets(url),
        check_backup(max_age_h=limits.backup_age_h, database_url=url),
    ]


def run(args: argparse.Namespace) -> int:
    """Print the report (or JSON); return 1 when a check failed, else 0."""
    from coursehub.doctor.result import exit_status, format_json, format_report

    results = run_checks(args)
    sys.stdout.write(format_json(results) if args.json else format_report(results))
    return exit_status(results)
