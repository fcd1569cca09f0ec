import pytest

from coursehub.errors import UsageError
from coursehub.resources.threads import N_THREAD_VARS, thread_env, threads_for_cpu_limit


def test_thread_env_sets_every_variable():
    env = thread_env(3)
    for name in N_THREAD_VARS:
        assert env[name] == "3"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["KMP_BLOCKTIME"] == "0"
    assert env["TF_NUM_INTEROP_THREADS"] == "2"


def test_thread_env_keeps_admin_values():
    env = thread_env(2, keep={"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "ACTIVE"})
    assert "OMP_NUM_THREADS" not in env
    assert "OMP_WAIT_POLICY" not in env
    assert env["MKL_NUM_THREADS"] == "2"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_thread_env_rejects_bad_counts(bad):
    with pytest.raises(UsageError, match="thread count"):
        thread_env(bad)


@pytest.mark.parametrize(("cpu_limit", "n"), [(0.5, 1), (1, 1), (2.0, 2), (2.9, 2), (28, 28)])
def test_threads_for_cpu_limit(cpu_limit, n):
    assert threads_for_cpu_limit(cpu_limit) == n


@pytest.mark.parametrize("bad", [0, -2, float("nan"), float("inf")])
def test_threads_for_cpu_limit_rejects(bad):
    with pytest.raises(UsageError):
        threads_for_cpu_limit(bad)
