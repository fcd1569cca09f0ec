"""The test groups' order under pytest-xdist: the longest first (``tests/suiteorder.py``)."""

import json
from types import SimpleNamespace

from suiteorder import load_durations, plan_group, plan_order


def test_the_longest_group_goes_first_and_ties_keep_the_collection_order():
    groups = ["a", "a", "b", "c", "d"]
    rank = plan_order(groups, {"a": 1.0, "b": 50.0, "c": 1.0, "d": 9.0})
    assert sorted(rank, key=rank.__getitem__) == ["b", "d", "a", "c"]


def test_an_unknown_group_is_given_the_upper_quartile_of_the_known_ones():
    seconds = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 100.0}
    rank = plan_order(["a", "b", "c", "d", "new"], seconds)
    assert sorted(rank, key=rank.__getitem__) == ["d", "new", "c", "b", "a"]


def test_without_durations_the_collection_order_stays():
    assert plan_order(["x", "y", "x", "z"], {}) == {"x": 0, "y": 1, "z": 2}


def test_a_missing_or_broken_durations_file_orders_nothing(tmp_path):
    assert load_durations(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert load_durations(tmp_path / "bad.json") == {}
    (tmp_path / "ok.json").write_text(json.dumps({"tests/test_a.py": 3, "slurm": "x"}))
    assert load_durations(tmp_path / "ok.json") == {"tests/test_a.py": 3.0}


def _item(nodeid: str, *markers: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: name in markers or None)


def test_slurm_and_nspawn_tests_form_one_group_each_and_the_others_their_files():
    assert plan_group(_item("tests/test_a.py::test_x")) == "tests/test_a.py"
    assert plan_group(_item("tests/test_a.py::test_y", "slurm", "slow")) == "slurm"
    assert plan_group(_item("tests/test_restore_nspawn.py::test_z", "nspawn")) == "nspawn"
    assert plan_group(_item("tests/test_exit_notice_nspawn.py::test_w", "nspawn")) == "nspawn"
