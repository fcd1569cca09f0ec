"""coursehub.settings: the table of COURSEHUB_* variables, the base folders, the course-id rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coursehub import settings
from coursehub.errors import UsageError
from coursehub.settings import (
    COURSE_ID_RE,
    SETTINGS,
    Setting,
    check_course_id,
    data_dir,
    render_settings_table,
    runs_dir,
    setting,
)
from coursehub.web.config import DEFAULTS, HUB_VARIABLES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "coursehub"
DOC = ROOT / "docs" / "settings.md"
#: Files whose text names the variables coursehub reads or sets: code and hub templates.
SCANNED_SUFFIXES = (".py", ".j2")
NAME = re.compile(r"COURSEHUB_[A-Z0-9_]+")
#: Name prefixes the code matches variables by (sandbox pass-through, variables
#: stripped from a job), not variables themselves.
PREFIXES = frozenset({"COURSEHUB_CG", "COURSEHUB_GPU_", "COURSEHUB_GRADING_", "COURSEHUB_SLURM_"})
#: Flask configuration keys the course app reads: ``config.get("KEY")``/``config["KEY"]``.
CONFIG_READ = re.compile(r"config(?:\.get\(|\[)\"([A-Z][A-Z0-9_]*)\"")
#: Keys the app sets itself or takes from the hub's JUPYTERHUB_* variables.
NOT_SETTINGS = frozenset({"SESSION_COOKIE_PATH", *HUB_VARIABLES.values()})


def _source_texts() -> dict[Path, str]:
    """The scanned files but this table's own module (else every row would name itself)."""
    return {
        path: path.read_text(encoding="utf-8")
        for path in sorted(SRC.rglob("*"))
        if path.suffix in SCANNED_SUFFIXES and path.is_file() and path != SRC / "settings.py"
    }


def _names_in_source() -> set[str]:
    return {name for text in _source_texts().values() for name in NAME.findall(text)}


def _app_config_names() -> set[str]:
    """``COURSEHUB_<KEY>`` of the course app's own configuration keys."""
    keys = set(DEFAULTS)
    for path, text in _source_texts().items():
        if "web" in path.relative_to(SRC).parts:
            keys |= set(CONFIG_READ.findall(text))
    return {f"COURSEHUB_{key}" for key in keys - NOT_SETTINGS}


def _expected_names() -> set[str]:
    return (_names_in_source() - PREFIXES) | _app_config_names()


# --- the table -----------------------------------------------------------------------


def test_docs_table_is_the_rendered_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = "<!-- settings-table:start -->\n", "<!-- settings-table:end -->"
    assert text.count(start) == 1 and text.count(end) == 1
    shown = text.split(start, 1)[1].split(end, 1)[0]
    assert shown == render_settings_table(), "docs/settings.md: paste render_settings_table()"


def test_every_variable_of_the_source_is_in_the_table() -> None:
    missing = _expected_names() - {s.name for s in SETTINGS}
    assert not missing, f"COURSEHUB_* variables without a row in SETTINGS: {sorted(missing)}"


def test_every_row_is_a_variable_of_the_source() -> None:
    stale = {s.name for s in SETTINGS} - _expected_names()
    assert not stale, f"rows of SETTINGS no code mentions: {sorted(stale)}"


def test_prefixes_of_the_source_are_known_and_cover_rows() -> None:
    names = _names_in_source()
    unknown = {n for n in names if n.endswith("_")} - PREFIXES
    assert not unknown, f"new COURSEHUB_* prefixes: {sorted(unknown)}"
    for prefix in PREFIXES:
        assert prefix in names
        assert any(s.name.startswith(prefix) and s.name != prefix for s in SETTINGS), prefix


def test_rows_are_unique_and_filled() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for row in SETTINGS:
        assert re.fullmatch(r"COURSEHUB_[A-Z0-9_]+", row.name), row
        assert row.default.strip() and row.meaning.strip(), row
        assert row.meaning.endswith("."), row
        assert "\n" not in row.default + row.meaning, row


def test_setting_finds_a_row_and_names_an_unknown_one() -> None:
    assert setting("COURSEHUB_DATA_DIR") == SETTINGS[0]
    assert isinstance(setting("COURSEHUB_RUNS_DIR"), Setting)
    with pytest.raises(KeyError, match="COURSEHUB_NOPE"):
        setting("COURSEHUB_NOPE")


def test_render_settings_table_has_one_line_per_row_in_order() -> None:
    lines = render_settings_table().splitlines()
    assert lines[:2] == ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    assert len(lines) == 2 + len(SETTINGS)
    for line, row in zip(lines[2:], SETTINGS, strict=True):
        assert line.startswith(f"| `{row.name}` | ")
        assert line.count(" | ") == 2 and line.endswith(" |")


def test_render_escapes_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "SETTINGS", (Setting("COURSEHUB_X", "a|b", "one\n two."),))
    assert render_settings_table().splitlines()[2] == "| `COURSEHUB_X` | a\\|b | one two. |"


# --- data directory and runs directory -----------------------------------------------


def test_data_dir_prefers_coursehub_data_dir_and_expands_home() -> None:
    home = Path.home()
    env = {"COURSEHUB_DATA_DIR": "~/cd", "XDG_DATA_HOME": "/xdg"}
    assert data_dir(env) == home / "cd"
    assert data_dir({"COURSEHUB_DATA_DIR": "/srv/ch"}) == Path("/srv/ch")


def test_data_dir_then_xdg_data_home_then_local_share() -> None:
    home = Path.home()
    assert data_dir({"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/coursehub")
    assert data_dir({"XDG_DATA_HOME": "~/xdg"}) == home / "xdg" / "coursehub"
    assert data_dir({"COURSEHUB_DATA_DIR": "", "XDG_DATA_HOME": ""}) == (
        home / ".local" / "share" / "coursehub"
    )
    assert data_dir({}) == home / ".local" / "share" / "coursehub"


def test_data_dir_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSEHUB_DATA_DIR", "/from/env")
    assert data_dir() == Path("/from/env")


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"COURSEHUB_DATA_DIR": "~/cd"},
        {"COURSEHUB_DATA_DIR": "rel"},
        {"XDG_DATA_HOME": "/xdg"},
        {"XDG_DATA_HOME": "~/x", "COURSEHUB_DATA_DIR": ""},
    ],
)
def test_the_catalog_file_lies_in_the_data_dir(env: dict[str, str]) -> None:
    from coursehub.catalog.db import SQLITE_FILENAME, database_url

    assert database_url(env) == f"sqlite:///{data_dir(env) / SQLITE_FILENAME}"


def test_runs_dir_rule() -> None:
    home = Path.home()
    assert runs_dir({"COURSEHUB_RUNS_DIR": "/var/runs"}) == Path("/var/runs")
    assert runs_dir({"COURSEHUB_RUNS_DIR": "~/r"}) == Path("~/r")  # not expanded, as today
    assert runs_dir({"COURSEHUB_RUNS_DIR": ""}) == home / ".cache" / "coursehub" / "runs"
    assert runs_dir({"XDG_CACHE_HOME": "/c"}) == home / ".cache" / "coursehub" / "runs"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"COURSEHUB_DATA_DIR": "/srv/demo"}, Path("/srv/demo")),
        ({"XDG_DATA_HOME": "/x"}, Path("/x/coursehub/demo")),
        ({}, Path.home() / ".local" / "share" / "coursehub" / "demo"),
    ],
)
def test_demo_data_dir_rule(env: dict[str, str], expected: Path) -> None:
    assert settings.demo_data_dir(env) == expected


def test_no_other_module_resolves_the_base_folders() -> None:
    """The data and runs directories are settings' alone: no copy of their rule elsewhere."""
    copies = {
        path.relative_to(SRC).as_posix()
        for path, text in _source_texts().items()
        if path.suffix == ".py"
        and ('"XDG_DATA_HOME"' in text.replace("'", '"') or '.cache" / "coursehub"' in text)
        and path.name != "env.py"  # the sandbox's list of variables it never passes on
    }
    assert copies == set()


# --- course ids ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "course_id",
    ["mlmeca-2025", "a-2025", "x1-y2-z3-999", "c1", "0", "a", "a" * 64, "abc-", "a--b"],
)
def test_course_id_accepted(course_id: str) -> None:
    assert check_course_id(course_id) == course_id


@pytest.mark.parametrize(
    "course_id",
    [
        "",
        ".",
        "..",
        "../etc",
        "a/../b",
        "/abs",
        "x/y",
        "a\\b",
        "-rf",
        "a.b",
        "a_b",
        "A-2025",
        "MLMECA-2025",
        "a" * 65,
        "x y",
        " a",
        "a\n",
        "a\x00",
        "é-2025",
        "～",
    ],
)
def test_course_id_refused(course_id: str) -> None:
    with pytest.raises(UsageError, match="is not a course id"):
        check_course_id(course_id)


def test_course_id_message_names_value_where_and_rule() -> None:
    with pytest.raises(UsageError) as caught:
        check_course_id("../etc", "--course")
    message = str(caught.value)
    assert message.startswith("--course '../etc' is not a course id: ")
    assert "1-64 lower-case letters" in message


def test_course_id_message_shortens_a_long_value() -> None:
    with pytest.raises(UsageError, match=r"\(500 characters\)") as caught:
        check_course_id("x" * 500)
    assert len(str(caught.value)) < 250


def test_course_id_refuses_a_non_string() -> None:
    with pytest.raises(UsageError, match="None is not a course id"):
        check_course_id(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "year"),
    [
        ("MLMECA", 2025),
        ("a", 0),
        ("Z" * 32, 9999),
        ("a.b_c-d", 2024),
        ("9-._x", 1999),
        ("UE.2_x", 2030),
    ],
)
def test_every_catalog_course_id_is_accepted(code: str, year: int) -> None:
    from coursehub.catalog.courses import make_course_id

    course_id = make_course_id(code, year)
    assert check_course_id(course_id) == course_id
    assert COURSE_ID_RE.match(course_id)


def test_accepted_course_ids_stay_one_path_component(tmp_path: Path) -> None:
    for course_id in ("mlmeca-2025", "a" * 64, "abc-"):
        path = (tmp_path / "courses" / check_course_id(course_id)).resolve()
        assert path.parent == (tmp_path / "courses").resolve()
        assert path.name == course_id


# --- the table's file ------------------------------------------------------------------


def test_load_settings_reads_rows_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[[setting]]\nname = "COURSEHUB_B"\ndefault = "unset"\nmeaning = "b"\n'
        '[[setting]]\nname = "COURSEHUB_A"\ndefault = "`1`"\nmeaning = """\\\nlong \\\n  text"""\n',
        encoding="utf-8",
    )
    assert settings.load_settings(path) == (
        Setting("COURSEHUB_B", "unset", "b"),
        Setting("COURSEHUB_A", "`1`", "long text"),
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('name = "COURSEHUB_X"\ndefault = "d"\n', r"setting 1 \(COURSEHUB_X\) must have exactly"),
        ('name = "COURSEHUB_X"\ndefault = "d"\nmeaning = 3\n', "setting 1 .* must have exactly"),
        ('name = "COURSEHUB_X"\ndefault = "d"\nmeaning = "m"\nextra = "e"\n', "extra"),
    ],
)
def test_load_settings_names_the_bad_row(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[[setting]]\n" + row, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        settings.load_settings(path)


def test_load_settings_refuses_a_name_twice(tmp_path: Path) -> None:
    row = '[[setting]]\nname = "COURSEHUB_X"\ndefault = "d"\nmeaning = "m"\n'
    path = tmp_path / "t.toml"
    path.write_text(row + row, encoding="utf-8")
    with pytest.raises(ValueError, match="setting 2 names COURSEHUB_X twice"):
        settings.load_settings(path)
