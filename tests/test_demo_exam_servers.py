"""``coursehub demo --exam-servers``: the hub environment and configuration of exam servers."""

from __future__ import annotations

from coursehub.demo.setup import demo_exam_environment, render_demo_config


def test_the_demo_points_exam_servers_at_its_course_app_exchange_and_data_dir(tmp_path):
    env = demo_exam_environment(tmp_path, 10101)
    assert env == {
        "COURSEHUB_EXAM_URL": "http://127.0.0.1:10101/services/coursehub/",
        "COURSEHUB_EXAM_ROOT": str(tmp_path / "exams"),
        "COURSEHUB_GRADING_EXCHANGE": str(tmp_path / "nbgrader" / "exchange"),
    }


def test_the_demo_hub_makes_exam_homes_its_own_account_s(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_CHP", "/bin/true")
    text = render_demo_config(tmp_path, 8000, "127.0.0.1", "sqlite://", 2)
    assert "exams=exam_servers_from_env(os.environ, hub_owned=True)," in text
    compile(text, "jupyterhub_config.py", "exec")


def test_the_demo_command_takes_the_exam_servers_option(monkeypatch, tmp_path):
    import coursehub.demo.hub as demo_hub
    from coursehub.cli import main

    seen = {}

    def fake_run_demo(data_dir, port, ip, spawner, exam_servers):
        seen.update(data_dir=data_dir, exam_servers=exam_servers)
        return 0

    monkeypatch.setattr(demo_hub, "run_demo", fake_run_demo)
    assert main(["demo", "--data-dir", str(tmp_path), "--exam-servers"]) == 0
    assert seen == {"data_dir": tmp_path, "exam_servers": True}
    assert main(["demo", "--data-dir", str(tmp_path)]) == 0
    assert seen["exam_servers"] is False
