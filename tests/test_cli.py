import subprocess
import sys

from coursehub import __version__
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
