"""The runner sees a job's exit at once, however long its memory-sampling interval.

The contention benchmark samples its students once a second (or less) so as
not to take CPU from them; the end of a job must still be seen, and its slots
given back, as soon as it exits, not at the next sample.
"""

from __future__ import annotations

from coursehub.runner.api import submit
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool

#: Far longer than any wait below: a job seen only at the next sample would time out.
SAMPLE_S = 600.0


def test_a_job_is_seen_to_end_before_the_next_memory_sample(tmp_path):
    script = tmp_path / "quick.py"
    script.write_text("print('done')\n")
    pool = SlotPool(tmp_path / "slots", 1)
    backend = LocalBackend(tmp_path / "runs", pool, use_cgroups=False, sample_s=SAMPLE_S)
    first = submit(str(script), backend=backend, name="first")
    second = submit(str(script), backend=backend, name="second")  # queued behind the first
    assert first.wait(timeout_s=120).returncode == 0
    result = second.wait(timeout_s=120)  # admitted once the first gave its slot back
    assert result.returncode == 0
    assert "done" in second.output()
