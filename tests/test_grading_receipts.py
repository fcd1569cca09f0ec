"""Receipts of collected submissions: a teacher's fixed folder still gets its feedback."""

from __future__ import annotations

from pathlib import Path

from coursehub.grading.assignments import release_feedback
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.grading.receipts import (
    RECEIPT_FILES,
    keep_receipt,
    receipt_dir,
    restore_receipt,
    restore_receipts,
)


def submission(
    folder: Path, secret: str = "s3cret", stamp: str = "2025-03-30 21:30:00 UTC"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submission_secret.txt").write_text(secret)
    (folder / "timestamp.txt").write_text(stamp)
    return folder


def test_a_receipt_puts_back_what_a_replaced_folder_lacks(tmp_path):
    receipt = receipt_dir(tmp_path / "course", "ps1", "bob")
    assert receipt == tmp_path / "course" / "coursehub" / "receipts" / "ps1" / "bob"
    keep_receipt(submission(tmp_path / "collected"), receipt)
    replaced = tmp_path / "course" / "submitted" / "bob" / "ps1"
    replaced.mkdir(parents=True)
    (replaced / "timestamp.txt").write_text("kept as the teacher wrote it")
    restore_receipts(tmp_path / "course", "ps1", ["bob", "nobody"])
    assert (replaced / "submission_secret.txt").read_text() == "s3cret"
    assert (replaced / "timestamp.txt").read_text() == "kept as the teacher wrote it"
    assert restore_receipt(tmp_path / "empty", tmp_path / "no-receipt") == list(RECEIPT_FILES)


def test_a_receipt_is_the_last_collected_submissions(tmp_path):
    receipt = tmp_path / "receipt"
    keep_receipt(submission(tmp_path / "first"), receipt)
    second = tmp_path / "second"
    second.mkdir()
    (second / "timestamp.txt").write_text("later")
    keep_receipt(second, receipt)
    assert (receipt / "timestamp.txt").read_text() == "later"
    assert not (receipt / "submission_secret.txt").exists()


def test_feedback_without_secret_nor_receipt_skips_that_student_only(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    for student in ("alice", "bob", "carol"):
        folder = layout.course_dir / "feedback" / student / "ps1"
        folder.mkdir(parents=True)
        (folder / "nb.html").write_text(f"<p>feedback of {student}</p>")
    submission(layout.course_dir / "feedback" / "alice" / "ps1", secret="a")
    keep_receipt(
        submission(tmp_path / "bob-collected", secret="b"),
        receipt_dir(layout.course_dir, "ps1", "bob"),
    )
    log = release_feedback(layout, "ps1")
    released = sorted(
        p.read_text() for p in (layout.exchange_root / "phys-2025" / "feedback").glob("*.html")
    )
    assert released == ["<p>feedback of alice</p>", "<p>feedback of bob</p>"]
    assert "No feedback released to carol for ps1" in log
