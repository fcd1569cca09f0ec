"""What a submission may hold (nbgrader#874) and the released data it does not copy (nbgrader#1414).

Real nbgrader fetch, submit and collect in a single-user course: a folder
over a limit is refused at submit with one line naming the limit, at collect
(put in the inbound another way) it is skipped, and at autograde it is
refused before nbgrader walks it; the other students are unaffected. A data
file shipped with the assignment and left unchanged is not copied into the
inbound, the student's nbgrader cache or ``submitted/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coursehub.cli import main
from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.autograde.job import check_submission
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.layout import CourseLayout, ensure_course, layout_from_env
from coursehub.grading.limits import (
    DEFAULT_MAX_FILES,
    SubmissionLimits,
    check_folder,
    large_shipped_files,
)

COURSE = "lim-2025"
DATA_BYTES = 3 * 2**20  # a data file 1000 times the notebook's size


def du(*folders: Path) -> int:
    """Bytes of the regular files under ``folders`` (hard links counted once)."""
    seen, total = set(), 0
    for folder in folders:
        for dirpath, _dirs, files in os.walk(folder):
            for name in files:
                st = os.lstat(os.path.join(dirpath, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


@pytest.fixture
def course(tmp_path, monkeypatch) -> CourseLayout:
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    layout = layout_from_env(COURSE)
    ensure_course(layout)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(DATA_BYTES))
    add_assignment(layout, "ps1", [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb", data])
    generate_assignment(layout, "ps1")
    release_assignment(layout, "ps1")
    return layout


def fetched(layout: CourseLayout, home: Path, student: str) -> Path:
    return fetch_assignment(layout.exchange_root, COURSE, "ps1", student, home / student)


def test_too_many_files_are_refused_at_submit_in_one_line_and_others_submit(
    course, tmp_path, capsys
):
    home = tmp_path / "home"
    crowded = fetched(course, home, "p1") / "many"
    crowded.mkdir()
    for i in range(DEFAULT_MAX_FILES + 1):
        (crowded / f"f{i}.txt").write_text("x")
    fetched(course, home, "p2")
    argv = ["grading", "submit", COURSE, "ps1", "--student", "p1", "--dir", str(home / "p1")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1]
    assert "Traceback" not in "\n".join(err)
    assert f"over the limit of {DEFAULT_MAX_FILES} files (PrivateSubmit.max_files)" in line
    assert "most are in many/" in line and "nothing was submitted" in line
    inbound = course.exchange_root / COURSE / "inbound"
    assert not list(inbound.iterdir())
    submit_assignment(course.exchange_root, COURSE, "ps1", "p2", home / "p2")
    assert [p.name.split("+")[0] for p in inbound.iterdir()] == ["p2"]


def test_a_file_over_max_file_size_is_refused_naming_it_and_the_option(course, tmp_path, capsys):
    home = tmp_path / "home"
    big = fetched(course, home, "p1") / "big.bin"
    with open(big, "wb") as handle:
        handle.truncate(2 * 10**9)  # sparse: no disk used
    argv = ["grading", "submit", COURSE, "ps1", "--student", "p1", "--dir", str(home / "p1")]
    assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds big.bin of 2 GB, over the limit of 100 MB per file" in line
    assert "(CourseDirectory.max_file_size)" in line
    assert not list((course.exchange_root / COURSE / "inbound").iterdir())


def test_the_total_size_limit_names_the_largest_file(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 6000)
    (tmp_path / "b.bin").write_bytes(b"x" * 5000)
    limits = SubmissionLimits(max_dir_size=10, max_file_size=10, max_files=10)
    reason = check_folder(tmp_path, limits)
    assert reason is not None and "holds 11 kB, over the limit of 10 kB" in reason
    assert "(CourseDirectory.max_dir_size): the largest file is a.bin of 6 kB" in reason
    assert check_folder(tmp_path, SubmissionLimits(max_dir_size=11)) is None


def test_collect_skips_and_autograde_refuses_a_crowded_submission(course, tmp_path):
    home = tmp_path / "home"
    for student in ("p1", "p2"):
        fetched(course, home, student)
        submit_assignment(course.exchange_root, COURSE, "ps1", student, home / student)
    inbound = course.exchange_root / COURSE / "inbound"
    (crowded,) = [p for p in inbound.iterdir() if p.name.startswith("p1+")]
    for i in range(DEFAULT_MAX_FILES + 1):  # put there another way than coursehub's submit
        (crowded / f"f{i}.txt").write_text("x")
    log = collect(course, "ps1")
    assert "PrivateSubmit.max_files" in log
    submitted = course.course_dir / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["p2"]
    shutil.copytree(crowded, submitted / "p1" / "ps1")  # by hand
    reason = check_submission(course, "ps1", "p1")
    assert reason is not None and "over the limit of 1000 files" in reason
    assert check_submission(course, "ps1", "p2") is None


def test_an_unchanged_data_file_is_not_copied_per_student_at_submit_and_collect(course, tmp_path):
    home = tmp_path / "home"
    students = [f"p{i}" for i in range(1, 4)]
    for student in students:
        fetched(course, home, student)
    edited = home / "p3" / COURSE / "ps1" / "data.bin"
    edited.write_bytes(b"my own data")
    before = du(home, course.exchange_root / COURSE / "inbound")
    for student in students:
        submit_assignment(course.exchange_root, COURSE, "ps1", student, home / student)
    collect(course, "ps1")
    growth = du(home, course.exchange_root / COURSE / "inbound", course.course_dir / "submitted")
    per_student = (growth - before) / len(students)
    assert per_student < DATA_BYTES / 10, f"{per_student:.0f} bytes per student at submit"
    submitted = course.course_dir / "submitted"
    assert not (submitted / "p1" / "ps1" / "data.bin").exists()
    assert (submitted / "p3" / "ps1" / "data.bin").read_bytes() == b"my own data"
    assert (submitted / "p1" / "ps1" / f"{DEMO_ASSIGNMENT}.ipynb").is_file()


def test_generate_names_a_large_file_shipped_with_the_assignment_and_where_it_belongs(
    course, tmp_path, capsys
):
    source = course.course_dir / "source" / "ps1"
    assert large_shipped_files(source) == []  # 3 MiB: under the 10 MiB default
    (line,) = large_shipped_files(source, threshold=2**20)
    assert line.startswith("data.bin (3 MiB) is copied 3 times per student")
    assert "9 MiB each" in line and "course data folder" in line
    big = tmp_path / "frames.npy"
    with open(big, "wb") as handle:
        handle.truncate(12 * 2**20)  # sparse: no disk used
    add_assignment(course, "ps2", [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb", big])
    assert main(["grading", "generate", COURSE, "ps2"]) == 0
    err = capsys.readouterr().err
    assert "warning: ps2: frames.npy (12 MiB) is copied 3 times per student" in err
    assert "data.bin" not in err
