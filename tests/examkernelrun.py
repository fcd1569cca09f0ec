"""Run cells in a real exam kernel and print what each gave, as JSON (tests/test_exam_*.py).

``python tests/examkernelrun.py RUNTIME_DIR CWD ALLOWED_IMPORTS [HIDDEN,...] < cells.json``: starts
:class:`coursehub.examroom.kernelmanager.ExamKernelManager` (connection file in
``RUNTIME_DIR``), runs each cell of the JSON list, prints ``[{"status", "text"}]``:
the cell's stream output and error lines. A script, so a test can run it as a
student's account.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

from coursehub.examroom.kernelmanager import ExamKernelManager


async def run_cells(
    runtime: Path, cwd: str, allowed: str, cells: list[str], hidden: list[str]
) -> list[dict]:
    manager = ExamKernelManager(
        kernel_name="python3",
        connection_file=str(runtime / f"kernel-{uuid.uuid4().hex[:8]}.json"),
        allowed_imports=allowed,
        hidden=hidden,
    )
    await manager.start_kernel(cwd=cwd, stdout=subprocess.DEVNULL)
    client = manager.client()
    client.start_channels()
    results = []
    try:
        await client.wait_for_ready(timeout=60)
        for cell in cells:
            lines: list[str] = []

            def keep(message: dict, lines: list[str] = lines) -> None:
                content = message["content"]
                if message["msg_type"] == "stream":
                    lines.append(content["text"])
                elif message["msg_type"] == "error":
                    lines.extend(content["traceback"])

            reply = await client.execute_interactive(cell, timeout=60, output_hook=keep)
            results.append({"status": reply["content"]["status"], "text": "".join(lines)})
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)
    return results


def main() -> None:
    runtime, cwd, allowed = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    hidden = [p for p in sys.argv[4].split(",") if p] if len(sys.argv) > 4 else []
    cells = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(run_cells(runtime, cwd, allowed, cells, hidden))))


if __name__ == "__main__":
    main()
