"""The test suite's own scheduling: under pytest-xdist each file stays on one worker.

``make test`` runs ``pytest -n N --dist loadgroup``; ``tests/suiteorder.py`` marks each
test with the ``xdist_group`` of its file (``slurm`` for every Slurm test), and
pytest-xdist appends the group to the node id it schedules by. When that breaks
(pytest-dev/pytest-xdist#1386), nothing fails: the Slurm tests just meet on one
cluster from several workers. This file makes that visible.
"""

import os

import pytest

pytestmark = pytest.mark.skipif(
    "PYTEST_XDIST_WORKER" not in os.environ, reason="only under pytest-xdist (make test)"
)


def test_this_test_is_scheduled_in_its_files_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only with --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_suite_grouping.py"), request.node.nodeid


@pytest.mark.slurm
def test_a_slurm_test_is_scheduled_in_the_slurm_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only with --dist loadgroup")
    assert request.node.nodeid.endswith("@slurm"), request.node.nodeid
