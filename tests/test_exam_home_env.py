"""An exam server's HOME is its exam home on the local spawners, whose user_env sets HOME last."""

from __future__ import annotations

from types import SimpleNamespace

from coursehub.spawn.cgroupspawner import CgroupLocalProcessSpawner, CgroupSimpleLocalProcessSpawner
from coursehub.spawn.examhome import ExamHomeMixin

ALICE = SimpleNamespace(name="alice", id=1, url="/user/alice/")


def test_an_exam_server_keeps_its_exam_home_and_a_course_server_its_own():
    spawner = CgroupSimpleLocalProcessSpawner(user=ALICE, home_dir_template="/homes/{username}")
    assert spawner.user_env({})["HOME"] == "/homes/alice"  # a course server: JupyterHub's
    spawner.environment = {"COURSEHUB_EXAM": "mlmeca-2025/final", "HOME": "/srv/exams/alice"}
    assert spawner.user_env({})["HOME"] == "/srv/exams/alice"
    spawner.environment = {"HOME": "/elsewhere"}  # not an exam: the admin's HOME is not kept
    assert spawner.user_env({})["HOME"] == "/homes/alice"


def test_both_local_spawners_carry_it():
    for spawner_class in (CgroupLocalProcessSpawner, CgroupSimpleLocalProcessSpawner):
        assert issubclass(spawner_class, ExamHomeMixin)
        assert spawner_class.__mro__.index(ExamHomeMixin) < [
            c.__name__ for c in spawner_class.__mro__
        ].index("LocalProcessSpawner")
