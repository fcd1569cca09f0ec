"""The test groups' order under pytest-xdist: the longest first (``tests/suiteorder.py``)."""

import json

from suiteorder import load_durations, plan_order


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
