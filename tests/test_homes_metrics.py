"""The homes near their quota as Prometheus series of the course app (``/metrics/usage``)."""

from __future__ import annotations

import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coursehub.catalog.db import make_engine, session_scope
from coursehub.cli import main
from coursehub.usage.metrics import cached_survey, render_metrics
from coursehub.web.testing import IDENTITIES, identity_headers
from loopfs import loop_mount

M = 2**20


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def scrape(client) -> dict:
    response = client.get("/metrics/usage", headers=identity_headers(IDENTITIES["admin"]))
    assert response.status_code == 200
    return families(response.get_data(as_text=True))


def test_the_homes_series_come_only_with_a_folder_of_homes(app, client, tmp_path):
    assert "coursehub_homes_near_quota" not in scrape(client)
    app.config["HOMES_DIR"] = str(tmp_path)
    found = scrape(client)
    [near] = found["coursehub_homes_near_quota"].samples
    assert (near.labels, near.value) == ({"homes": str(tmp_path)}, 0.0)
    assert found["coursehub_homes_quota_read"].samples[0].value == 0.0


@pytest.mark.root
def test_a_btrfs_home_near_its_quota_is_counted_and_named_per_student(
    database_url, tmp_path, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.delenv("COURSEHUB_HOME_QUOTA", raising=False)
    assert main(["db", "seed", "--database-url", database_url]) == 0
    with loop_mount(tmp_path, 200, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        for user in ("p2500001", "p2500002"):
            subprocess.run(
                ["btrfs", "subvolume", "create", str(disk / user)], check=True, capture_output=True
            )
        assert (
            main(["home", "quota", "--portal", "MECA", "20M", "--database-url", database_url]) == 0
        )
        assert main(["home", "apply", str(disk), "--database-url", database_url]) == 0
        (disk / "p2500001" / "big.bin").write_bytes(b"\1" * 19 * M)
        subprocess.run(["sync"], check=True)
        engine = make_engine(database_url)
        try:
            with session_scope(engine) as session:
                found = families(render_metrics(session, True, disk).decode())
                (disk / "p2500002" / "big.bin").write_bytes(b"\1" * 19 * M)
                subprocess.run(["sync"], check=True)
                kept = cached_survey(session, disk)
                again = cached_survey(session, disk, max_age_s=0)
        finally:
            engine.dispose()
    assert found["coursehub_homes_near_quota"].samples[0].value == 1.0
    assert found["coursehub_homes_quota_read"].samples[0].value == 2.0
    [percent] = found["coursehub_home_quota_used_percent"].samples
    assert percent.labels == {"username": "p2500001"} and 90 <= percent.value <= 100
    assert len(kept.near) == 1 and len(again.near) == 2  # reused within its age, then made again
