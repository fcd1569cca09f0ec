"""The demo's first hour: its accounts, the names of its services, the notebook's threads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from traitlets.config import Config

from coursehub.demo.accounts import DemoAccount, list_accounts, render_accounts
from coursehub.demo.seed import DEMO_ADMIN, DEMO_MANAGER, ensure_staff, seed_catalog
from coursehub.hub.render import render_service_names

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples/pendulum/double_pendulum.ipynb"


@pytest.fixture
def demo_catalog(tmp_path, sqlite_template):
    from coursehub.catalog.db import make_engine, session_scope

    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    with session_scope(engine) as session:
        seed_catalog(session)
        ensure_staff(session)
    engine.dispose()
    return url


def test_the_banner_lists_the_admin_the_manager_the_team_and_some_students(demo_catalog):
    text = "\n".join(render_accounts(list_accounts(demo_catalog)))
    assert f"{DEMO_ADMIN[0]:<10} Camille Roux (admin)" in text
    assert f"{DEMO_MANAGER[0]:<10} Lucie Garnier (manager of portal MECA)" in text
    assert "mbuffat    Marc Buffat (lead, mlmeca-2025)" in text
    assert "gmartin    Gaël Martin (grader, mlmeca-2025)" in text
    assert "Students (30):" in text and "... and 27 more" in text
    assert text.index("Administrator") < text.index("Portal manager") < text.index("Teaching")


def test_the_demo_staff_is_kept_once_across_restarts(demo_catalog):
    from sqlalchemy import func, select

    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.catalog.models.courses import Person

    engine = make_engine(demo_catalog)
    with session_scope(engine) as session:
        ensure_staff(session)
        count = session.scalar(
            select(func.count()).where(Person.username.in_([DEMO_ADMIN[0], DEMO_MANAGER[0]]))
        )
    engine.dispose()
    assert count == 2


def test_accounts_render_in_sections_without_an_empty_one():
    lines = render_accounts(
        [DemoAccount("admin", "Camille Roux", "admin", "")]
        + [DemoAccount(f"p{i}", f"S {i}", "student", "c-2025") for i in range(2)]
    )
    assert lines[0].startswith("  Administrator")
    assert not any("Teaching team" in line for line in lines)
    assert lines[-1] == "    p1         S 1 (c-2025)"


def test_a_person_with_several_roles_is_listed_once_and_every_manager_is_listed():
    lines = render_accounts(
        [
            DemoAccount("admin", "Camille Roux", "admin", ""),
            DemoAccount("lgarnier", "Lucie Garnier", "manager", "MECA"),
            DemoAccount("jmanager", "Jo Manager", "manager", "INFO"),
            DemoAccount("jmanager", "Jo Manager", "manager", "PHYS"),
            *(DemoAccount("tdupont", "Thérèse Dupont", "teacher", c) for c in ("a-1", "b-1")),
            DemoAccount("tdupont", "Thérèse Dupont", "lead", "c-1"),
        ]
    )
    text = "\n".join(lines)
    assert text.count("tdupont") == 1
    assert "tdupont    Thérèse Dupont (teacher, a-1; teacher, b-1; lead, c-1)" in text
    assert "lgarnier   Lucie Garnier (manager of portal MECA)" in text
    assert "jmanager   Jo Manager (manager of portals INFO, PHYS)" in text


def load_demo_config(tmp_path, monkeypatch, names):
    from coursehub.atomicfile import write_atomically
    from coursehub.demo.setup import grading_layouts, render_demo_config
    from coursehub.grading.layout import make_layout, render_course_config

    layout = make_layout("mlmeca-2025", tmp_path / "nbgrader" / "courses", tmp_path / "x")
    write_atomically(layout.config_path, render_course_config(layout))
    for name, value in [
        ("COURSEHUB_CHP", "/bin/true"),
        ("COURSEHUB_DEMO_PASSWORD", "pw"),
        ("COURSEHUB_DEMO_SERVICE_TOKEN", "t"),
        ("FORMGRADER_TOKEN_MLMECA_2025", "fg"),
    ]:
        monkeypatch.setenv(name, value)
    config = Config()
    text = render_demo_config(
        tmp_path, 8000, "127.0.0.1", "sqlite://", 2, grading_layouts(tmp_path), None, names
    )
    exec(text, {"get_config": lambda: config})
    return config


def test_the_demo_hub_has_an_admin_and_names_its_services_for_people(tmp_path, monkeypatch):
    config = load_demo_config(
        tmp_path, monkeypatch, {"mlmeca-2025": "Grading: Machine Learning for Mechanics"}
    )
    assert config.Authenticator.admin_users == {DEMO_ADMIN[0]}
    assert config.Authenticator.allowed_users == {DEMO_ADMIN[0], DEMO_MANAGER[0]}
    services = {s["name"]: s for s in config.JupyterHub.services}
    assert services["coursehub"]["info"]["display_name"] == "Courses"
    assert services["mlmeca-2025"]["info"]["display_name"] == (
        "Grading: Machine Learning for Mechanics"
    )
    (template_dir,) = config.JupyterHub.template_paths
    assert (Path(template_dir) / "page.html").is_file()


def test_service_names_are_rendered_only_when_there_are_some():
    assert render_service_names({}) == ""
    config = Config()
    config.JupyterHub.services = [{"name": "c1"}, {"name": "other"}]
    exec(render_service_names({"c1": "Grading: Mécanique"}), {"c": config})
    assert config.JupyterHub.services == [
        {"name": "c1", "info": {"display_name": "Grading: Mécanique"}},
        {"name": "other"},
    ]


def test_formgrader_names_come_from_the_course_titles(demo_catalog):
    from coursehub.demo.setup import formgrader_names

    assert formgrader_names(demo_catalog, ["mlmeca-2025", "gone-2020"]) == {
        "mlmeca-2025": "Grading: Machine Learning for Mechanics",
        "gone-2020": "Grading: gone-2020",
    }


@pytest.mark.parametrize(("env", "n_threads"), [({"OMP_NUM_THREADS": "3"}, 3), ({}, 1)])
def test_the_notebook_takes_its_thread_count_from_the_servers_environment(
    env, n_threads, tmp_path, monkeypatch
):
    cell = next(
        "".join(c["source"])
        for c in json.loads(NOTEBOOK.read_text())["cells"]
        if "N_THREADS =" in "".join(c["source"])
    )
    for name in ("PENDULUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(cell, namespace)
    assert namespace["N_THREADS"] == n_threads


def test_the_demo_manager_manages_the_mechanics_portal(demo_catalog):
    from coursehub.catalog.courses import get_portal
    from coursehub.catalog.db import make_engine, session_scope

    engine = make_engine(demo_catalog)
    with session_scope(engine) as session:
        managers = [p.username for p in get_portal(session, DEMO_MANAGER[3]).managers]
    engine.dispose()
    assert managers == [DEMO_MANAGER[0]]
