"""Which NVIDIA devices each kind of spawner lets a server open (pure rules, from tables)."""

from __future__ import annotations

import pytest

from coursehub.contract import make_profile
from coursehub.spawn.devices import (
    DeviceRule,
    nvidia_access,
    nvidia_majors,
    parse_proc_devices,
    plan_device_rules,
)
from coursehub.spawn.profiles import spawner_override

PROC_DEVICES = """Character devices:
  1 mem
  5 /dev/tty
136 pts
195 nvidia-frontend
235 nvidia-caps
510 nvidia-uvm

Block devices:
  7 loop
259 blkext
"""
CHAR = parse_proc_devices(PROC_DEVICES)
CPU = make_profile("cpu-course", cpu_limit=2, mem_limit="4G")
GPU = make_profile("gpu-course", cpu_limit=2, mem_limit="8G", gpus=1)


def test_proc_devices_gives_character_majors_only():
    assert CHAR == {
        "mem": 1,
        "/dev/tty": 5,
        "pts": 136,
        "nvidia-frontend": 195,
        "nvidia-caps": 235,
        "nvidia-uvm": 510,
    }
    assert nvidia_majors(CHAR) == {"nvidia-frontend": 195, "nvidia-caps": 235, "nvidia-uvm": 510}
    assert nvidia_majors({"mem": 1}) == {"nvidia": 195}


def test_a_server_without_gpu_is_allowed_every_device_but_nvidias():
    assert plan_device_rules([], CHAR) == [
        DeviceRule("devices.deny", "a"),
        DeviceRule("devices.allow", "c 1:* rwm"),
        DeviceRule("devices.allow", "c 5:* rwm"),
        DeviceRule("devices.allow", "c 136:* rwm"),
    ]


def test_a_gpu_server_is_allowed_its_gpu_and_the_shared_nvidia_nodes_only():
    rules = [r.rule for r in plan_device_rules([1], CHAR) if r.file == "devices.allow"]
    assert rules == [
        "c 1:* rwm",
        "c 5:* rwm",
        "c 136:* rwm",
        "c 195:1 rwm",
        "c 195:254 rwm",
        "c 195:255 rwm",
        "c 235:* rwm",
        "c 510:* rwm",
    ]


@pytest.mark.parametrize(
    ("gpus", "minor", "allowed"),
    [
        ([], 0, False),
        ([], 255, False),
        ([1], 1, True),
        ([1], 0, False),
        ([1], 255, True),
        ([0, 2], 2, True),
        ([0, 2], 1, False),
    ],
)
def test_the_devices_list_the_rules_leave_opens_only_the_profiles_gpus(gpus, minor, allowed):
    listed = "\n".join(r.rule for r in plan_device_rules(gpus, CHAR) if r.file == "devices.allow")
    assert nvidia_access(listed, minor) is allowed


def test_everything_allowed_means_every_gpu_is_open():
    assert nvidia_access("a *:* rwm\n", 3) is True


@pytest.mark.parametrize("bad", [[254], [255], [-1]])
def test_a_control_node_is_not_a_gpu(bad):
    with pytest.raises(ValueError, match="0-253"):
        plan_device_rules(bad, CHAR)


def isolation(kind, profile, gpu_ids):
    """What hides the GPUs from a server of ``kind``, as the profile override sets it."""
    o = spawner_override(profile, kind, gpu_ids)
    env = o["environment"]
    return {
        "local": lambda: (o["visible_gpus"], env["CUDA_VISIBLE_DEVICES"]),
        "systemd": lambda: (
            o["isolate_devices"],
            list(o["unit_extra_properties"].get("DeviceAllow", [])),
            o["unit_extra_properties"].get("DevicePolicy"),
        ),
        "slurm": lambda: (o["req_gres"], "CUDA_VISIBLE_DEVICES" in env),
        "kubernetes": lambda: (o["extra_resource_limits"], env.get("NVIDIA_VISIBLE_DEVICES")),
    }[kind]()


NVIDIA_SHARED = ["/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "/dev/nvidia-uvm-tools rw"]


@pytest.mark.parametrize(
    ("kind", "profile", "gpu_ids", "expected"),
    [
        ("local", CPU, [], ([], "")),
        ("local", GPU, [1], ([1], "1")),
        ("systemd", CPU, [], (True, [], None)),
        ("systemd", GPU, [1], (False, ["/dev/nvidia1 rw", *NVIDIA_SHARED], "closed")),
        ("slurm", CPU, [], ("", False)),  # Slurm: ConstrainDevices=yes hides the rest
        ("slurm", GPU, [], ("gpu:1", False)),
        ("kubernetes", CPU, [], ({}, "void")),
        ("kubernetes", GPU, [], ({"nvidia.com/gpu": "1"}, None)),  # the device plugin sets it
    ],
)
def test_every_spawner_kind_hides_the_gpus_a_profile_does_not_grant(
    kind, profile, gpu_ids, expected
):
    assert isolation(kind, profile, gpu_ids) == expected
