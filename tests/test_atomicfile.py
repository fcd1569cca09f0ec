"""coursehub.atomicfile: whole files or none, explicit modes, no temporary file left behind."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from coursehub.atomicfile import atomic_path, write_atomically
from coursehub.filemodes import private_umask


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("grades\r\nalice;12\r\n", b"grades\r\nalice;12\r\n"),  # CSV line ends kept
        ("élève ☃\n", "élève ☃\n".encode()),
        (b"\x00\xff binary", b"\x00\xff binary"),
        ("", b""),
    ],
)
def test_the_file_holds_exactly_the_data_given(tmp_path, data, expected):
    path = write_atomically(tmp_path / "out", data)
    assert path.read_bytes() == expected
    assert entries(tmp_path) == ["out"]


def test_missing_parent_folders_are_created(tmp_path):
    write_atomically(tmp_path / "a" / "b" / "report.json", "{}")
    assert (tmp_path / "a" / "b" / "report.json").read_text() == "{}"


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_the_final_mode_is_the_one_asked_whatever_the_umask(tmp_path, mode, umask):
    with private_umask(umask):
        write_atomically(tmp_path / "f", "x", mode=mode)
    assert mode_of(tmp_path / "f") == mode


@pytest.mark.parametrize("old_mode", [0o644, 0o666])
def test_a_private_file_replacing_a_readable_one_is_private(tmp_path, old_mode):
    path = tmp_path / "grades.csv"
    path.write_text("old")
    path.chmod(old_mode)
    write_atomically(path, "new", mode=0o600)
    assert (path.read_text(), mode_of(path)) == ("new", 0o600)


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_mode_none_follows_the_umask_like_open(tmp_path, umask, expected):
    with private_umask(umask):
        write_atomically(tmp_path / "data.npz", b"x", mode=None)
    assert mode_of(tmp_path / "data.npz") == expected


def test_readers_see_the_old_file_until_the_block_succeeds(tmp_path):
    path = tmp_path / "model.pt"
    path.write_text("old")
    with atomic_path(path) as tmp:
        tmp.write_text("new, half written")
        assert path.read_text() == "old"
        assert mode_of(tmp) == 0o600  # nobody reads it half-written
    assert path.read_text() == "new, half written"
    assert entries(tmp_path) == ["model.pt"]


@pytest.mark.parametrize("error", [RuntimeError("writer failed"), KeyboardInterrupt()])
def test_a_failing_writer_leaves_the_old_file_and_no_temporary_file(tmp_path, error):
    path = tmp_path / "plot.png"
    path.write_bytes(b"old")
    with pytest.raises(type(error)), atomic_path(path) as tmp:
        tmp.write_bytes(b"partial")
        raise error
    assert path.read_bytes() == b"old"
    assert entries(tmp_path) == ["plot.png"]


def test_a_failing_writer_creates_nothing_where_there_was_nothing(tmp_path):
    with pytest.raises(ValueError), atomic_path(tmp_path / "new.json") as tmp:
        tmp.write_text("{")
        raise ValueError("bad document")
    assert entries(tmp_path) == []


def test_without_replace_an_existing_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "dataset.npz"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        write_atomically(path, b"new", replace=False)
    assert path.read_bytes() == b"precious"
    assert entries(tmp_path) == ["dataset.npz"]


def test_without_replace_a_new_file_is_written(tmp_path):
    write_atomically(tmp_path / "dataset.npz", b"new", replace=False, mode=0o640)
    assert (tmp_path / "dataset.npz").read_bytes() == b"new"
    assert mode_of(tmp_path / "dataset.npz") == 0o640
    assert entries(tmp_path) == ["dataset.npz"]


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_file_where_a_folder_should_be_is_not_mistaken_for_an_existing_destination(
    tmp_path, replace, depth
):
    (tmp_path / "results").write_text("a file")
    path = tmp_path / "results" / Path(*["sub"] * (depth - 1)) / "report.json"
    with pytest.raises(NotADirectoryError):
        write_atomically(path, "{}", replace=replace)
    assert entries(tmp_path) == ["results"]


def test_a_symlink_at_the_destination_is_replaced_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not mine")
    (tmp_path / "link").symlink_to(target)
    write_atomically(tmp_path / "link", "mine", mode=0o600)
    assert target.read_text() == "not mine"
    assert not (tmp_path / "link").is_symlink()
    assert (tmp_path / "link").read_text() == "mine"
