"""Back up a department hub, lose the machine, restore into a new one: nothing is lost.

In a booted Debian 12 (tests/nspawnbox.py) ``coursehub deploy`` installs the
hub, with the catalog in SQLite or in the local PostgreSQL (``--database
postgresql``: a role and database created and migrated); the hub and the
course app start, the demo catalog is seeded and synced into the hub, and a
demo assignment is released, fetched and submitted by two students,
collected and graded (nbgrader's API, as tests/test_backup.py does). The
units stop, the backup timer's service writes the archive, and the archive is
copied out before the container powers off: its overlay is volatile, so the
next boot is a new machine. There ``coursehub deploy`` installs again,
``coursehub restore --force`` (the new install's catalog is migrated, hence
not empty) puts the archive back, and a digest of every part (the catalog's
and the hub's rows, the gradebooks' rows, the grading and exchange files, the
cookie secret, ``secrets.env``, ``web.env`` and the TLS key in
``/etc/coursehub``) is the same as before; the courses, grades and submissions are also compared as
they read. The Unix accounts are made again from the restored catalog
(``coursehub accounts sync``; homes are not in a backup), and the hub starts
on the restored database and knows the students.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nspawnbox import DEPLOY, MARKS, PYTHON, SETTINGS, START_UNITS, Container, boot, name_host

pytestmark = MARKS

#: Runs in the first container with the install's settings: the demo catalog, then a
#: demo assignment released, submitted by two students, collected and graded.
BUILD = """
from pathlib import Path
from nbgrader.api import Gradebook
from coursehub.catalog.db import make_engine, session_factory
from coursehub.catalog.seed import seed_demo
from coursehub.grading.assignments import add_assignment, collect, generate_assignment
from coursehub.grading.assignments import release_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.gradebook import sync_gradebook
from coursehub.grading.layout import ensure_course, layout_from_env
import os
SCORES = {"p2500001": 1.0, "p2500002": 0.5}
os.environ["COURSEHUB_GRADING_SINGLE_USER"] = "1"  # root hands in for the students here
engine = make_engine(os.environ["COURSEHUB_DATABASE_URL"])
with session_factory(engine)() as session:
    course = seed_demo(session)
    layout = layout_from_env(course.course_id)
    ensure_course(layout)
    add_assignment(layout, "ps1", [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
    generate_assignment(layout, "ps1")
    release_assignment(layout, "ps1")
    sync_gradebook(session, course, layout)
    session.commit()
for student in SCORES:
    home = Path("/tmp/homes") / student
    fetch_assignment(layout.exchange_root, layout.course_id, "ps1", student, home)
    submit_assignment(layout.exchange_root, layout.course_id, "ps1", student, home)
print(collect(layout, "ps1"))
with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
    for student, score in SCORES.items():
        with gradebook.db.no_autoflush:
            submission = gradebook.add_submission("ps1", student)
        for notebook in submission.notebooks:
            for cell in notebook.grades:
                cell.manual_score = score
    gradebook.db.commit()
"""

#: Runs in a container with the install's settings: a digest of each part, and the courses,
#: grades and submissions as they read. Rows are read through SQLAlchemy (SQLite and
#: PostgreSQL alike), sorted; files by path, mode and content.
DIGEST = """
import hashlib, json, os, sqlite3, stat, sys
from pathlib import Path
from sqlalchemy import MetaData, create_engine, select
from nbgrader.api import Gradebook
def rows(url):
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    lines = []
    with engine.connect() as db:
        for table in sorted(meta.tables.values(), key=lambda t: t.name):
            lines += sorted(f"{table.name} {tuple(row)!r}" for row in db.execute(select(table)))
    engine.dispose()
    return hashlib.sha256("\\n".join(lines).encode()).hexdigest()
def files(root, skip=()):
    lines = []
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and path.suffix not in skip:
            mode = stat.S_IMODE(path.stat().st_mode)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{path.relative_to(root)} {mode:o} {digest}")
    return hashlib.sha256("\\n".join(lines).encode()).hexdigest(), len(lines)
courses, exchange = Path("/srv/nbgrader/courses"), Path("/usr/local/share/nbgrader/exchange")
gradebooks = sorted(courses.glob("*/gradebook.db"))
out = {
    "catalog": rows(os.environ["COURSEHUB_DATABASE_URL"]),
    "hub": rows("sqlite:////var/lib/coursehub/hub/jupyterhub.sqlite"),
    "gradebooks": [rows(f"sqlite:///{path}") for path in gradebooks],
    "grading files": files(courses, skip=(".db",)),
    "exchange files": files(exchange),
}
engine = create_engine(os.environ["COURSEHUB_DATABASE_URL"])
with engine.connect() as db:
    out["courses"] = sorted(r[0] for r in db.exec_driver_sql("SELECT course_id FROM courses"))
engine.dispose()
grades = {}
for path in gradebooks:
    with Gradebook(f"sqlite:///{path}", course_id=path.parent.name) as gradebook:
        for sub in gradebook.assignment_submissions("ps1"):
            grades[f"{path.parent.name} {sub.student.id}"] = sub.score
out["grades"] = grades
etc = Path("/etc/coursehub")  # where coursehub deploy keeps the hub's secrets
secret = etc / "jupyterhub_cookie_secret"
out["cookie secret"] = f"{stat.S_IMODE(secret.stat().st_mode):o} {secret.read_text().strip()}"
out["secrets"] = [
    f"{name} {stat.S_IMODE((etc / name).stat().st_mode):o} "
    + hashlib.sha256((etc / name).read_bytes()).hexdigest()
    for name in ("secrets.env", "web.env", "tls/trial-self-signed-key.pem")
]
handed_in = courses.glob("*/submitted/*/*/*.ipynb")
out["submissions"] = sorted(str(path.relative_to(courses)) for path in handed_in)
print(json.dumps(out))
"""

#: The hub's users, through its API with the course app's token (once the hub answers).
USERS = """
import json, os, time, urllib.error, urllib.request
headers = {"Authorization": "token " + os.environ["COURSEHUB_SERVICE_TOKEN"]}
request = urllib.request.Request("http://127.0.0.1:8081/hub/api/users", headers=headers)
for _ in range(240):
    try:
        with urllib.request.urlopen(request) as answer:
            print(" ".join(sorted(user["name"] for user in json.load(answer))))
            break
    except (urllib.error.URLError, OSError):
        time.sleep(0.5)
else:
    print("no answer")
"""

COURSEHUB = f"{SETTINGS}cd / && {PYTHON} -m coursehub"


def _deploy(box: Container, database: str) -> None:
    name_host(box)
    done = box.sh(f"{DEPLOY} --database {database}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "coursehub doctor:" in done.stdout


def _settled(box: Container, text: str, *args: str):
    """Run the Python ``text`` with the install's settings in its environment."""
    inside = "/tmp/settled.py"
    box.path(inside).write_text(text)
    return box.sh(f"{SETTINGS}cd / && {PYTHON} {inside} {' '.join(args)}", timeout=300)


def _build_and_back_up(box: Container, database: str, out: Path) -> dict[str, object]:
    """Install, fill and back up the first machine; return its digest, the archive in ``out``."""
    _deploy(box, database)
    started = box.sh(START_UNITS)
    assert started.returncode == 0, started.stderr
    built = _settled(box, BUILD)
    assert built.returncode == 0, built.stdout + built.stderr
    sync = box.sh(
        f"{COURSEHUB} accounts sync && {COURSEHUB} hub sync "
        "--hub-url http://127.0.0.1:8081/hub/api --token-env COURSEHUB_SERVICE_TOKEN",
        timeout=300,
    )
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "p2500001" in _settled(box, USERS).stdout.split()
    box.sh("systemctl stop coursehub-hub coursehub-web")  # nothing writes while it is copied
    before = _settled(box, DIGEST)
    assert before.returncode == 0, before.stdout + before.stderr
    backup = box.sh("systemctl start coursehub-backup.service", timeout=300)
    journal = box.sh("journalctl --no-pager -o cat -u coursehub-backup").stdout
    assert backup.returncode == 0, backup.stderr + journal
    (archive,) = box.path("/var/lib/coursehub/backups").iterdir()
    shutil.copy2(archive, out / archive.name)
    return json.loads(before.stdout)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_backup_restored_on_a_new_machine_gives_the_same_courses_grades_and_submissions(
    database, tmp_path
):
    with boot(tmp_path / "first.log") as first:
        before = _build_and_back_up(first, database, tmp_path)
    (archive,) = tmp_path.glob("*.tar.gz")
    assert before["courses"] and len(before["grades"]) == 2, before
    assert len(before["submissions"]) == 2, before
    with boot(tmp_path / "second.log") as second:
        _deploy(second, database)
        shutil.copy2(archive, second.path(f"/root/{archive.name}"))
        restore = second.sh(
            f"{COURSEHUB} restore --force --hub-dir /var/lib/coursehub/hub /root/{archive.name}",
            timeout=300,
        )
        assert restore.returncode == 0, restore.stdout + restore.stderr
        assert "restored hub/cookie-secret: /etc/coursehub/jupyterhub_cookie_secret" in (
            restore.stdout
        )
        after = _settled(second, DIGEST)
        assert after.returncode == 0, after.stdout + after.stderr
        restored = json.loads(after.stdout)
        # the same cookie secret (0600): no one is signed out; the same service token
        assert restored["cookie secret"] == before["cookie secret"]
        assert restored["secrets"] == before["secrets"]
        assert restored == before
        started = second.sh(f"{COURSEHUB} accounts sync && {START_UNITS}")
        assert started.returncode == 0, started.stdout + started.stderr
        users = _settled(second, USERS).stdout.split()
        journal = second.sh("journalctl --no-pager -o cat -n 40 -u coursehub-hub").stdout
        assert {"p2500001", "p2500002"} <= set(users), " ".join(users) + journal
