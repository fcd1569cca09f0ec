"""A home's size for the student's page: the walk, its bound, an unreadable home."""

from __future__ import annotations

import os

from coursehub.homequota.usage import home_usage


def test_size_counts_the_blocks_of_files_and_folders_without_following_links(tmp_path):
    home = tmp_path / "p2500001"
    (home / "data").mkdir(parents=True)
    (home / "data" / "big.bin").write_bytes(os.urandom(1 << 20))
    (home / "link").symlink_to("/usr")  # never followed
    used = home_usage(home)
    assert used.used_bytes is not None
    assert 1 << 20 <= used.used_bytes < 1 << 21


def test_too_many_files_is_unknown(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i}").write_text("x")
    used = home_usage(tmp_path, max_entries=10)
    assert used.used_bytes is None and used.reason == "more than 10 files"


def test_a_missing_home_is_unknown_with_its_reason(tmp_path):
    used = home_usage(tmp_path / "nobody")
    assert used.used_bytes is None
    assert "nobody" in used.reason and "No such file" in used.reason
