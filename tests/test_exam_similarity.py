"""The similarity report: near-identical code found after renaming and reformatting, only it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from coursehub.cli import main
from coursehub.grading.similarity import (
    StudentCode,
    find_similar,
    given_code,
    render_report,
    submitted_code,
)

COURSE, ASSIGNMENT = "mlmeca-2025", "final"

GIVEN = """import numpy as np

def energy(theta, omega):
    # YOUR CODE HERE
    raise NotImplementedError()
"""

ORIGINAL = """import numpy as np

def energy(theta, omega):
    kinetic = 0.5 * omega ** 2
    potential = 9.81 * (1 - np.cos(theta))
    total = kinetic + potential
    for step in range(3):
        total = total + 0 * step
    return total
"""

# The same answer with every name changed, other spacing and a comment.
RENAMED = """import numpy as np

def energy(a, b):
    # my own work
    k = 0.5*b**2
    p = 9.81*(1-np.cos(a))
    t = k+p
    for i in range(3):
        t = t + 0*i
    return t
"""

# Another way to the same result.
OTHER = """import numpy as np

def energy(theta, omega):
    return np.add(np.square(omega) / 2.0, np.multiply(9.81, 1.0 - np.cos(theta)))
"""


def notebook(path: Path, code: str, grade_id: str = "energy") -> Path:
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True}
    intro = nbformat.v4.new_code_cell("import numpy as np")
    node = nbformat.v4.new_notebook(cells=[intro, cell])
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(node, str(path))
    return path


@pytest.fixture
def course_dir(tmp_path):
    course = tmp_path / "courses" / COURSE
    notebook(course / "release" / ASSIGNMENT / "ps.ipynb", GIVEN)
    for student, code in (
        ("p2500001", ORIGINAL),
        ("p2500002", RENAMED),
        ("p2500003", OTHER),
        ("p2500004", GIVEN),  # handed in unchanged: no code of their own
    ):
        notebook(course / "submitted" / student / ASSIGNMENT / "ps.ipynb", code)
    return course


def test_renamed_and_reformatted_code_is_found_and_different_code_is_not(course_dir):
    given = given_code(course_dir, ASSIGNMENT)
    codes = submitted_code(course_dir, ASSIGNMENT, given)
    assert [c.student_id for c in codes] == ["p2500001", "p2500002", "p2500003"]
    assert list(codes[0].cells) == ["ps:energy"]  # the unchanged intro cell is not theirs
    [pair] = find_similar(codes, given.values())
    assert (pair.first, pair.second) == ("p2500001", "p2500002")
    assert pair.score >= 0.9 and pair.shared_tokens > 0
    low = find_similar(codes, given.values(), threshold=0.01)
    assert all(p.score < 0.5 for p in low if "p2500003" in (p.first, p.second))


def test_the_given_code_alone_is_not_a_match():
    given = ["import numpy as np\n\n" + ORIGINAL]
    codes = [StudentCode("a", {"x": ORIGINAL}), StudentCode("b", {"x": ORIGINAL})]
    assert find_similar(codes, given) == []
    assert len(find_similar(codes)) == 1


def test_a_bad_threshold_is_refused():
    with pytest.raises(ValueError, match=r"threshold: must be in \(0, 1\], got 0"):
        find_similar([], threshold=0)


def test_a_link_and_a_broken_notebook_are_skipped(course_dir, tmp_path):
    outside = notebook(tmp_path / "elsewhere.ipynb", ORIGINAL)
    linked = course_dir / "submitted" / "p2500005" / ASSIGNMENT
    linked.mkdir(parents=True)
    (linked / "ps.ipynb").symlink_to(outside)
    broken = course_dir / "submitted" / "p2500006" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / "ps.ipynb").write_text("{not json")
    codes = submitted_code(course_dir, ASSIGNMENT, given_code(course_dir, ASSIGNMENT))
    assert {c.student_id for c in codes} == {"p2500001", "p2500002", "p2500003"}


def test_the_report_escapes_the_students_code():
    hostile = ORIGINAL + "x = '<script>alert(1)</script>'\n"
    codes = [StudentCode("a", {"c": hostile}), StudentCode("b", {"c": hostile})]
    page = render_report("final", find_similar(codes), codes)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "a and b: 100% and 100%" in page


def test_the_command_prints_the_pairs_and_writes_the_report(
    course_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    report = tmp_path / "report.html"
    argv = ["exam", "similarity", COURSE, ASSIGNMENT, "--html", str(report)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3 submission(s) with code of their own, 3 pair(s) compared, 1 at or above 80 %" in out
    pairs = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(pairs) == 1 and pairs[0].startswith("  p2500001 and p2500002: ")
    assert "p2500001 and p2500002" in report.read_text()
    assert main([*argv, "--threshold", "0"]) == 2
    assert "--threshold: must be 1 to 100 (percent), got 0" in capsys.readouterr().err
