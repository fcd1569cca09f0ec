"""The nspawn tests' preflight: a machine that cannot run a container skips them, saying why."""

from __future__ import annotations

import os
import shutil

import pytest

from nspawnbox import preflight


@pytest.mark.skipif(shutil.which("systemd-nspawn") is None, reason="no systemd-nspawn")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (systemd-nspawn)")
def test_a_container_that_cannot_start_skips_with_systemd_nspawns_own_words(tmp_path):
    with pytest.raises(pytest.skip.Exception) as skipped:
        preflight(tmp_path / "no-root")  # no root file system: nspawn refuses at once
    said = str(skipped.value)
    assert said.startswith("systemd-nspawn cannot run here: systemd-nspawn --quiet -D "), said
    assert "--pipe /bin/true: " in said and len(said) > 60, said
