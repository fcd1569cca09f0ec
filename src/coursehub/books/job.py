"""The runner job of a book build: ``python -m coursehub.books.job -- SANDBOX_COMMAND...``.

The runner (thread and memory limits, a timeout) starts this module with the
sandbox command made by :func:`coursehub.books.sandboxjob.run_build_job`
(:func:`coursehub.sandbox.command.plan_sandbox_command`); it runs that command
with an allow-listed environment and exits with its status. Inside the
sandbox the same module runs as ``python -m coursehub.books.job BOOK OUT``:
Jupyter Book 1.x's command line (``jupyter-book build BOOK --path-output OUT
--builder html``, https://jupyterbook.org/en/stable/reference/cli.html).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from typing import Any


def use_ipc_kernels(folder: str) -> None:
    """Start every kernel of this process with Unix sockets in ``folder`` (``ipc`` transport).

    The sandbox has no network, not even a loopback that is up, so the
    kernels myst-nb starts (``nbclient``, ``jupyter_client``'s default
    ``tcp`` on 127.0.0.1) would never answer; sockets in a folder do, as for
    the autograde kernels (:mod:`coursehub.grading.sandbox.kernel`).
    """
    from jupyter_client.manager import KernelManager

    if getattr(KernelManager, "_coursehub_ipc", False):
        return
    original = KernelManager._async_pre_start_kernel

    async def pre_start(self: KernelManager, **kw: Any) -> Any:
        self.transport = "ipc"
        self.ip = os.path.join(folder, f"k-{uuid.uuid4().hex[:12]}")
        return await original(self, **kw)

    KernelManager._async_pre_start_kernel = pre_start  # type: ignore[method-assign]
    KernelManager._coursehub_ipc = True  # type: ignore[attr-defined]


def refuse_substitutions() -> None:
    """Show MyST substitutions (``{{ ... }}``) as literal text instead of rendering them.

    myst-parser renders a substitution with an unsandboxed ``jinja2.Environment``
    (``myst_parser.mdit_to_docutils.base.DocutilsRenderer.render_substitution``),
    so ``{{ ... }}`` in a page runs code at build time whatever the course's
    execute setting; a page's own front matter (``myst: enable_extensions``)
    can turn the extension on even where ``_config.yml`` does not
    (:func:`coursehub.books.bookconfig.plan_myst_extensions`). Each one becomes its
    own text, with a build warning that names its line.
    """
    from docutils import nodes
    from myst_parser.mdit_to_docutils.base import DocutilsRenderer
    from myst_parser.warnings_ import MystWarnings

    def render(self: Any, token: Any, inline: bool) -> None:
        text = "{{" + token.content + "}}"
        self.create_warning(
            "substitutions are not rendered in course books (they would run code)",
            MystWarnings.SUBSTITUTION,
            line=(token.map or [0])[0] + 1,
            append_to=self.current_node,
        )
        literal = nodes.literal(text, text)
        self.current_node.append(literal if inline else nodes.paragraph("", "", literal))

    DocutilsRenderer.render_substitution = render  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """Run the sandbox command after ``--``, or build ``argv[0]`` into ``argv[1]``.

    Returns
    -------
    int
        The exit status of the sandboxed command or of jupyter-book.
    """
    if argv[:1] == ["--"] and len(argv) > 1:
        from coursehub.sandbox.env import plan_sandbox_env

        return subprocess.call(argv[1:], env=plan_sandbox_env(os.environ), stdin=subprocess.DEVNULL)
    if len(argv) != 2:
        print("usage: python -m coursehub.books.job BOOK OUT | -- COMMAND...", file=sys.stderr)
        return 2
    use_ipc_kernels(os.environ.get("TMPDIR") or tempfile.gettempdir())
    refuse_substitutions()
    from jupyter_book.cli.main import main as jupyter_book

    try:
        jupyter_book(["build", argv[0], "--path-output", argv[1], "--builder", "html"])
    except SystemExit as exc:  # click ends with sys.exit(status)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
