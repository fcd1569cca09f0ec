"""Usage files are read line by line within size caps, never through a link, owner from fstat."""

from __future__ import annotations

import os

import pytest

from coursehub.meter.journal import (
    MAX_FILE_BYTES,
    JournalError,
    append_record,
    journal_path,
    list_journals,
    read_records,
)
from coursehub.meter.records import UsageRecord, render_record

AT = 1_790_000_000.0


def job(n: int) -> UsageRecord:
    return UsageRecord("close", f"job:h:{n}", "job", "ada", "alpha", AT, AT - 60, cpu_s=float(n))


def test_a_huge_sparse_file_is_refused_without_being_read(tmp_path):
    path = tmp_path / "zzz-2026-12-02.jsonl"
    with open(path, "wb") as handle:
        handle.truncate(3 * 2**30)  # 3 GiB of holes: nothing on disk, everything to read
    with pytest.raises(JournalError, match=f"3221225472 bytes, more than the {MAX_FILE_BYTES}"):
        read_records(path)


def test_a_line_longer_than_the_cap_is_reported_and_the_next_lines_are_read(tmp_path):
    path = tmp_path / "runner-ada-2026-12-02.jsonl"
    long_line = b'{"event": "' + b"x" * 5000 + b'"}\n'
    path.write_bytes(render_record(job(1)).encode() + long_line + render_record(job(2)).encode())
    batch = read_records(path, max_line=1000)
    assert [r.cpu_s for r in batch.records] == [1.0, 2.0]
    first = len(render_record(job(1)))
    assert batch.problems == [f"{path.name}:{first}: a line longer than 1000 bytes"]
    assert batch.offset == path.stat().st_size


def test_an_endless_line_is_skipped_in_bounded_reads_and_its_end_reported_later(tmp_path):
    path = tmp_path / "runner-ada-2026-12-02.jsonl"
    path.write_bytes(b"x" * 10_000)  # no newline at all
    batch = read_records(path, max_line=1000, max_read=4096)
    assert batch.records == [] and len(batch.problems) == 1
    assert 0 < batch.offset <= 4096  # memory bounded: the rest waits for the next read
    rest = read_records(path, batch.offset, max_line=1000, max_read=4096)
    assert rest.offset > batch.offset and rest.records == []


def test_a_read_stops_at_its_byte_budget_and_the_next_one_goes_on(tmp_path):
    for n in range(1, 101):
        append_record(tmp_path, "runner-ada", job(n))
    (path,) = list_journals(tmp_path)
    seen: list[float] = []
    offset, reads = 0, 0
    while offset < path.stat().st_size:
        batch = read_records(path, offset, max_read=3000)
        assert batch.offset - offset <= 3000
        seen += [r.cpu_s for r in batch.records]
        offset, reads = batch.offset, reads + 1
    assert seen == [float(n) for n in range(1, 101)] and reads > 5


def test_a_symbolic_link_is_not_followed(tmp_path):
    target = tmp_path / "target.jsonl"
    target.write_text(render_record(job(1)))
    link = tmp_path / "link-2026-12-02.jsonl"
    link.symlink_to(target)
    with pytest.raises(JournalError, match="a symbolic link, not followed"):
        read_records(link)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "fifo-2026-12-02.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(JournalError, match="not a regular file"):
        read_records(fifo)


def test_links_and_fifos_are_listed_to_be_reported_and_folders_are_not(tmp_path):
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "a.jsonl")
    (tmp_path / "c.jsonl").mkdir()
    os.mkfifo(tmp_path / "d.jsonl")
    (tmp_path / "e.txt").write_text("")
    assert [p.name for p in list_journals(tmp_path)] == ["a.jsonl", "b.jsonl", "d.jsonl"]


def test_the_owner_and_links_come_from_the_opened_file(tmp_path):
    path = append_record(tmp_path, "runner-ada", job(1))
    os.link(path, tmp_path / "again.jsonl")
    batch = read_records(path)
    assert (batch.owner_uid, batch.links) == (os.geteuid(), 2)


def test_a_writer_never_appends_through_a_link_nor_waits_on_a_fifo(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("")
    day_file = journal_path(tmp_path, "runner-ada", AT)
    day_file.symlink_to(target)
    with pytest.raises(OSError):
        append_record(tmp_path, "runner-ada", job(1))
    assert target.read_text() == ""
    day_file.unlink()
    os.mkfifo(day_file)
    with pytest.raises(OSError):  # ENXIO at once: no reader, never a hang
        append_record(tmp_path, "runner-ada", job(1))


def test_a_writer_never_appends_to_a_file_another_user_made_first(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (chown)")
    day_file = journal_path(tmp_path, "runner-ada", AT)
    day_file.write_text("")
    os.chmod(day_file, 0o666)
    os.chown(day_file, 65534, 65534)  # nobody's, made in the shared jobs folder first
    with pytest.raises(OSError, match="is not a file of this user"):
        append_record(tmp_path, "runner-ada", job(1))
    assert day_file.read_text() == ""
