import errno
import os
import subprocess
import sys

import pytest

from coursehub import __version__, cli
from coursehub.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys, contextlib, io\n"
        "from coursehub.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n"
        "    except SystemExit:\n        pass\n"
        "heavy = [m for m in ('torch', 'scipy', 'matplotlib', 'flask', 'sqlalchemy', 'jupyterhub')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _parser_raising(exc):
    import argparse

    parser = argparse.ArgumentParser(prog="coursehub")
    commands = parser.add_subparsers()

    def fail(_args):
        raise exc

    commands.add_parser("write").set_defaults(func=fail)
    return parser


@pytest.mark.parametrize(
    ("errno_", "line"),
    [
        (errno.ENOSPC, "coursehub: error: disk full: cannot write /x/out.csv (No space left"),
        (errno.EDQUOT, "coursehub: error: quota exceeded: cannot write /x/out.csv (Disk quota"),
        (
            errno.EROFS,
            "coursehub: error: read-only file system: cannot write /x/out.csv (Read-only",
        ),
    ],
)
def test_a_full_disk_or_quota_from_any_command_is_one_line_with_status_1(
    monkeypatch, capsys, errno_, line
):
    full = OSError(errno_, os.strerror(errno_), "/x/out.csv")
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(full))
    assert main(["write"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(line) and len(err.strip().splitlines()) == 1


def test_any_other_os_error_is_a_bug_and_keeps_its_traceback(monkeypatch):
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(PermissionError(13, "no")))
    with pytest.raises(PermissionError):
        main(["write"])
