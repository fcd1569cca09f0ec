"""Profile overrides against the real spawner classes: trait names, validation, what they launch."""

from __future__ import annotations

import asyncio
import os
import pwd
from importlib import import_module
from types import SimpleNamespace
from unittest import mock

import pytest
from traitlets import HasTraits

from coursehub.contract import SPAWNER_KINDS, make_profile
from coursehub.spawn.cgroupspawner import CgroupLocalProcessSpawner
from coursehub.spawn.profiles import spawner_override
from coursehub.spawn.spawner import apply_override

batchspawner = pytest.importorskip("batchspawner", reason="batchspawner is not installed")
systemdspawner = pytest.importorskip(
    "systemdspawner", reason="jupyterhub-systemdspawner is not installed"
)
kubespawner_spawner = pytest.importorskip(
    "kubespawner.spawner", reason="jupyterhub-kubespawner is not installed"
)

GIB = 1024**3
CPU_ONLY = make_profile("m2", cpu_limit=1.5, mem_limit="3G", n_threads=1)
WITH_GPU = make_profile("gpu", cpu_limit=2, mem_limit="8G", gpus=1)
# The classes `coursehub hub config` renders (coursehub's subclasses add the stop notice).
CLASSES = {
    "local": CgroupLocalProcessSpawner,
    "systemd": import_module("coursehub.spawn.systemdserver").CoursehubSystemdSpawner,
    "slurm": import_module("coursehub.spawn.slurmspawner").CoursehubSlurmSpawner,
    "kubernetes": kubespawner_spawner.KubeSpawner,
}


def make_user(name: str = "alice") -> SimpleNamespace:
    return SimpleNamespace(name=name, id=7, url=f"/user/{name}/", groups=[], escaped_name=name)


def make_hub() -> SimpleNamespace:
    return SimpleNamespace(
        api_url="http://127.0.0.1:8081/hub/api",
        base_url="/hub/",
        url="http://127.0.0.1:8081/hub/",
        public_host="",
    )


def make_spawner(kind: str) -> HasTraits:
    """Instantiate the real spawner class of ``kind`` without touching systemd or Kubernetes."""
    cls = CLASSES[kind]
    if kind == "systemd":
        with mock.patch.object(systemdspawner.systemd, "get_systemd_version", return_value=255):
            return cls(user=make_user(), hub=make_hub(), dynamic_users=True)
    if kind == "kubernetes":
        with (
            mock.patch.object(kubespawner_spawner, "load_config"),
            mock.patch.object(kubespawner_spawner, "shared_client"),
        ):
            return cls(user=make_user(), hub=make_hub(), _mock=True)
    if kind == "slurm":
        # batchspawner reads the user's home and shell from the password database
        return cls(user=make_user(pwd.getpwuid(os.getuid()).pw_name), hub=make_hub())
    return cls(user=make_user(), hub=make_hub())


def test_every_kind_has_its_real_class():
    assert set(CLASSES) == set(SPAWNER_KINDS)


@pytest.mark.parametrize("profile", [CPU_ONLY, WITH_GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("kind", SPAWNER_KINDS)
def test_every_override_key_is_a_configurable_trait_of_the_class(kind, profile):
    traits = CLASSES[kind].class_traits(config=True)
    override = spawner_override(profile, kind, gpu_ids=[0])
    assert set(override) - set(traits) == set()


@pytest.mark.parametrize("profile", [CPU_ONLY, WITH_GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("kind", SPAWNER_KINDS)
def test_the_traits_accept_every_override_value(kind, profile):
    spawner = make_spawner(kind)
    override = spawner_override(profile, kind, gpu_ids=[1])
    apply_override(spawner, override)
    for name, value in override.items():
        assert getattr(spawner, name) == value, name
    assert isinstance(spawner.cpu_limit, float)
    assert isinstance(spawner.mem_limit, int)
    assert spawner.environment["OMP_NUM_THREADS"] == str(profile.n_threads)


def test_systemd_unit_gets_quota_memory_and_only_its_gpu():
    spawner = make_spawner("systemd")
    apply_override(spawner, spawner_override(WITH_GPU, "systemd", gpu_ids=[1]))
    launched = mock.AsyncMock()
    with (
        mock.patch.object(systemdspawner.systemd, "service_running", side_effect=[False, True]),
        mock.patch.object(systemdspawner.systemd, "service_failed", return_value=False),
        mock.patch.object(systemdspawner.systemd, "start_transient_service", launched),
    ):
        asyncio.run(spawner.start())
    kwargs = launched.await_args.kwargs
    properties = kwargs["properties"]
    assert properties["CPUQuota"] == "200%"
    assert properties["MemoryMax"] == 8 * GIB
    assert properties["MemorySwapMax"] == "0"
    assert properties["DevicePolicy"] == "closed"
    assert isinstance(properties["DeviceAllow"], list)
    assert "/dev/nvidia1 rw" in properties["DeviceAllow"]
    assert "/dev/nvidia0 rw" not in properties["DeviceAllow"]
    assert "PrivateDevices" not in properties
    assert kwargs["environment_variables"]["CUDA_VISIBLE_DEVICES"] == "1"


def test_systemd_unit_without_gpu_hides_every_device():
    spawner = make_spawner("systemd")
    apply_override(spawner, spawner_override(CPU_ONLY, "systemd"))
    assert spawner.isolate_devices is True
    assert "DeviceAllow" not in spawner.unit_extra_properties


def test_slurm_batch_script_asks_for_the_profile():
    spawner = make_spawner("slurm")
    apply_override(spawner, spawner_override(WITH_GPU, "slurm"))
    script = asyncio.run(spawner._get_batch_script(**spawner.get_req_subvars(), cmd="true"))
    assert "#SBATCH --cpus-per-task=2\n" in script
    assert "#SBATCH --mem=8192M\n" in script
    assert "#SBATCH --gres=gpu:1\n" in script


def test_slurm_batch_script_without_gpu_asks_for_none():
    spawner = make_spawner("slurm")
    apply_override(spawner, spawner_override(CPU_ONLY, "slurm"))
    script = asyncio.run(spawner._get_batch_script(**spawner.get_req_subvars(), cmd="true"))
    assert "--gres" not in script
    assert "#SBATCH --cpus-per-task=2\n" in script
    assert "#SBATCH --mem=3072M\n" in script


def test_kubernetes_pod_limits_carry_the_profile():
    spawner = make_spawner("kubernetes")
    apply_override(spawner, spawner_override(WITH_GPU, "kubernetes"))
    pod = asyncio.run(spawner.get_pod_manifest())
    container = pod.spec.containers[0]
    assert container.resources.limits == {"cpu": 2.0, "memory": 8 * GIB, "nvidia.com/gpu": "1"}
    env = {e.name: e.value for e in container.env}
    assert env["OMP_NUM_THREADS"] == "2"


def test_kubernetes_pod_without_gpu_sees_no_gpu_even_if_its_image_says_all():
    spawner = make_spawner("kubernetes")
    apply_override(spawner, spawner_override(CPU_ONLY, "kubernetes"))
    container = asyncio.run(spawner.get_pod_manifest()).spec.containers[0]
    assert "nvidia.com/gpu" not in container.resources.limits
    assert {e.name: e.value for e in container.env}["NVIDIA_VISIBLE_DEVICES"] == "void"
    apply_override(spawner, spawner_override(WITH_GPU, "kubernetes"))  # the next spawn: GPU
    container = asyncio.run(spawner.get_pod_manifest()).spec.containers[0]
    assert "NVIDIA_VISIBLE_DEVICES" not in {e.name for e in container.env}


def test_local_spawner_gets_the_gpus_its_devices_cgroup_allows():
    spawner = make_spawner("local")
    apply_override(spawner, spawner_override(WITH_GPU, "local", gpu_ids=[1]))
    assert spawner.visible_gpus == [1]
    apply_override(spawner, spawner_override(CPU_ONLY, "local"))
    assert spawner.visible_gpus == []
