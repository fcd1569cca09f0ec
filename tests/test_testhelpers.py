"""tests/helpers.py: waiting fails with what was awaited; golden files diff and regenerate."""

from __future__ import annotations

import itertools

import pytest

import helpers
from helpers import WaitTimeoutError, assert_matches_golden, free_port, wait_until


def test_wait_until_returns_the_first_true_value():
    values = iter([None, 0, "", "ready", "later"])
    assert wait_until(lambda: next(values), timeout_s=5, interval_s=0) == "ready"


def test_wait_until_names_what_it_awaited_and_the_last_value():
    counter = itertools.count()
    with pytest.raises(
        WaitTimeoutError, match=r"the pid file: not met after 0.05 s \(last value: 0\)"
    ):
        wait_until(lambda: next(counter) * 0, timeout_s=0.05, interval_s=0.01, what="the pid file")


def test_wait_until_stops_at_once_when_the_predicate_raises():
    calls = []

    def died() -> bool:
        calls.append(1)
        raise RuntimeError("the server exited")

    with pytest.raises(RuntimeError, match="the server exited"):
        wait_until(died, timeout_s=30)
    assert len(calls) == 1


def test_free_port_gives_a_bindable_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


@pytest.fixture
def golden_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers, "GOLDEN_DIR", tmp_path)
    monkeypatch.delenv(helpers.REGENERATE_ENV, raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("golden", "text"),
    [
        (b"a\nb\n", "a\nB\n"),
        (b"a\r\nb\r\n", "a\nb\n"),  # line ends count
        (b"a\nb\n", "a\nb"),  # so does the last newline
    ],
)
def test_a_mismatch_fails_with_a_diff_and_how_to_regenerate(golden_dir, golden, text):
    (golden_dir / "x.golden").write_bytes(golden)
    with pytest.raises(AssertionError) as failure:
        assert_matches_golden(text, "x.golden")
    assert "--- golden/x.golden" in str(failure.value)
    assert "COURSEHUB_REGENERATE_GOLDEN=1" in str(failure.value)


def test_a_missing_golden_file_fails_and_says_how_to_create_it(golden_dir):
    with pytest.raises(AssertionError, match="COURSEHUB_REGENERATE_GOLDEN=1"):
        assert_matches_golden("text\n", "new.golden")


def test_regenerating_rewrites_the_file_byte_for_byte(golden_dir, monkeypatch):
    (golden_dir / "x.golden").write_bytes(b"old\n")
    monkeypatch.setenv(helpers.REGENERATE_ENV, "1")
    assert_matches_golden("néw\r\n", "x.golden")
    assert (golden_dir / "x.golden").read_bytes() == "néw\r\n".encode()
    monkeypatch.delenv(helpers.REGENERATE_ENV)
    assert_matches_golden("néw\r\n", "x.golden")


# --- the course app's page actions ------------------------------------------------------


def _roster_form() -> dict[str, object]:
    import io

    text = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\np2600001;Martin;Léa;lea@example.org;G1\r\n"
    return {
        "mode": "add",
        "username_rule": "student_id",
        "roster": (io.BytesIO(text.encode("utf-8")), "roster.csv"),
    }


def test_page_actions_post_a_form_with_the_token_of_its_page(pages):
    roster = "/courses/mlmeca-2025/roster"
    assert pages.get(roster, "student").status_code == 403
    refused = pages.client.post(roster, data=_roster_form(), headers=pages.headers("teacher"))
    assert refused.status_code == 400  # no CSRF token
    preview = pages.post_form(roster, "teacher", _roster_form())
    assert preview.status_code == 200
    assert "p2600001" in preview.get_data(as_text=True)
