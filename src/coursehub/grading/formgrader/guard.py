"""A jupyter_server extension: a course's formgrader service serves the formgrader, nothing else.

Each course's formgrader is ``python -m jupyterhub.singleuser`` (nbgrader's
"Using nbgrader with JupyterHub"), a whole Jupyter server: kernels,
terminals, the contents API, Lab and the classic tree, as the formgrader's
Unix account, for every member of the course's team. nbgrader's formgrader
pages call only its own handlers (``/formgrader/...`` and
``/formgrader/api/...``, ``nbgrader/server_extensions/formgrader/handlers.py``
and ``apihandlers.py``); its "edit" links to ``/tree``, ``/notebooks`` and
``/terminals`` lead to the notebook UI, not to the formgrader. So
:func:`coursehub.grading.formgrader.service.formgrader_command` runs it
with jupyter_server's own settings (https://jupyter-server.readthedocs.io/en/latest/other/full-config.html):

- ``ServerApp.terminals_enabled=False``;
- ``ServerApp.kernel_manager_class`` = :class:`RefusingKernelManager`: no
  kernel starts through the server (nbgrader's "autograde" button starts its
  own, sandboxed kernels: :mod:`coursehub.grading.sandbox.kernel`);
- ``ServerApp.jpserver_extensions``: Lab, the notebook UI, the language
  server, the terminals, nbgrader's student extensions (assignment list,
  course list, validation: it executes a notebook) off
  (:data:`coursehub.grading.formgrader.service.DISABLED_EXTENSIONS`), this
  extension on (also in a site's whole server,
  ``COURSEHUB_FORMGRADER_FULL_SERVER=1``: it then refuses nothing but still
  sandboxes and sanitises as below).

This extension then answers 403 to every path below the service's prefix
but those of :data:`ALLOWED_PREFIXES` (:func:`plan_request`): an allow-list,
so an API a later jupyter_server adds is refused too. nbgrader's Course List
links the formgrader as ``/services/<course_id>/lab?formgrader=true``: that
one address is sent on to ``/formgrader``.

It also marks what a student's notebook produced. The files of a
submission (``/formgrader/submissions/<id>/<path>``, nbgrader's
``SubmissionFilesHandler``: images, but also any ``.html`` or ``.svg`` a
student handed in) are sent with ``Content-Security-Policy:``
:data:`coursehub.contract.SANDBOX_CSP` (an opaque origin: no cookie, no
formgrader API as the teacher); the manual grading page itself keeps its
scripts (grades are saved from it) and gets the student's outputs sanitised
instead (:func:`coursehub.grading.studenthtml.sanitizing_config`, set here
on the server's configuration before nbgrader's extension builds its
exporter, and in every course's ``nbgrader_config.py``).
"""

from __future__ import annotations

import re
from typing import Any

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web
from tornado.httputil import HTTPHeaders, HTTPServerRequest

from coursehub.contract import SANDBOX_CSP
from coursehub.grading.formgrader.service import FULL_SERVER_SETTING, GUARD_EXTENSION

#: First path segments (below the service prefix) a formgrader answers: nbgrader's pages and
#: API, the hub's OAuth callback, log-in/out (jupyterhub.singleuser) and jupyter_server's assets.
ALLOWED_PREFIXES = ("formgrader", "oauth_callback", "login", "logout", "static")
#: The Course List's link to a formgrader (nbgrader ``JupyterHubAuthPlugin``): to ``/formgrader``.
COURSE_LIST_PATH = "lab"

_SUBMISSION_PAGE = re.compile(r"formgrader/submissions/(?P<rest>.*)")


def plan_request(path: str, base_url: str, query: str = "") -> str:
    """Return what the formgrader does with ``path``: ``allow``, ``refuse``, ``formgrader`` (pure).

    ``formgrader`` means: redirect to the formgrader (the Course List's
    ``lab?formgrader=true``). The service's root itself is allowed (it
    redirects to ``ServerApp.default_url``); a path outside ``base_url`` is
    not the service's and is allowed (the router answers 404).
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    if not path.startswith(base):
        return "allow"
    rest = path[len(base) :]
    if not rest:
        return "allow"
    first = rest.split("/", 1)[0]
    if first in ALLOWED_PREFIXES:
        return "allow"
    if rest.rstrip("/") == COURSE_LIST_PATH and "formgrader=true" in query.split("&"):
        return "formgrader"
    return "refuse"


def is_submission_file(path: str, base_url: str) -> bool:
    """Return whether ``path`` is a file of a submission, sent in the sandbox (pure).

    Those are nbgrader's ``/formgrader/submissions/<id>/<path>`` but the
    manual grading page ``submissions/<id>/`` and the bundled assets
    ``submissions/components/...`` (MathJax, loaded by that page).
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    if not path.startswith(base):
        return False
    match = _SUBMISSION_PAGE.fullmatch(path[len(base) :])
    if match is None:
        return False
    rest = match["rest"]
    if rest.startswith("components/"):
        return False
    submission, _, file_path = rest.partition("/")
    return bool(submission) and bool(file_path)


def with_sandbox(csp: str | None) -> str:
    """Return ``csp`` with :data:`SANDBOX_CSP` in front (``frame-ancestors`` etc. kept) (pure)."""
    if not csp:
        return SANDBOX_CSP
    return f"{SANDBOX_CSP}; {csp}"


class RefusingKernelManager(AsyncMappingKernelManager):
    """The formgrader's ``ServerApp.kernel_manager_class``: every kernel start is refused.

    Raises
    ------
    tornado.web.HTTPError
        403, from :meth:`start_kernel`, whatever asks (``POST /api/kernels``,
        ``/api/sessions``).
    """

    async def start_kernel(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        raise web.HTTPError(403, "the formgrader runs no kernels")


class RefusedHandler(web.RequestHandler):
    """403 for every method on a path :func:`plan_request` refuses (but the Course List's link)."""

    def prepare(self) -> None:
        plan = plan_request(
            self.request.path, self.settings.get("base_url", "/"), self.request.query
        )
        if plan == "formgrader" and self.request.method in ("GET", "HEAD"):
            base = self.settings.get("base_url", "/").rstrip("/")
            self.redirect(f"{base}/formgrader/")
            return
        raise web.HTTPError(403, "not part of the formgrader")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{status_code}: this course service serves the formgrader only\n")


class SubmissionSandbox(web.OutputTransform):
    """Send a submission's files with :data:`SANDBOX_CSP` (a tornado output transform)."""

    base_url = "/"

    def __init__(self, request: HTTPServerRequest) -> None:
        super().__init__(request)
        self._sandbox = is_submission_file(request.path, self.base_url)

    def transform_first_chunk(
        self, status_code: int, headers: HTTPHeaders, chunk: bytes, finishing: bool
    ) -> tuple[int, HTTPHeaders, bytes]:
        if self._sandbox:
            headers["Content-Security-Policy"] = with_sandbox(
                headers.get("Content-Security-Policy")
            )
            headers["X-Content-Type-Options"] = "nosniff"
        return status_code, headers, chunk


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": GUARD_EXTENSION}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Refuse what is not the formgrader, sandbox submission files, sanitise outputs.

    Its "autograde" button's kernels fork from a kernel fork server of this
    process (:func:`coursehub.grading.sandbox.kernel.fork_kernels_in_this_process`).
    """
    from coursehub.grading.sandbox.kernel import fork_kernels_in_this_process
    from coursehub.grading.studenthtml import sanitizing_config

    fork_kernels_in_this_process()

    webapp = serverapp.web_app
    base_url = webapp.settings.get("base_url", "/")
    # before nbgrader's extension (loaded after this one: names in order) builds its exporter
    serverapp.config.merge(sanitizing_config())
    exporter = webapp.settings.get("nbgrader_exporter")
    if exporter is not None:  # nbgrader loaded first after all
        exporter.register_preprocessor(sanitizing_config().HTMLExporter.preprocessors[0], True)
    transform = type("CourseSubmissionSandbox", (SubmissionSandbox,), {"base_url": base_url})
    webapp.add_transform(transform)
    if str(webapp.settings.get(FULL_SERVER_SETTING, "")).lower() in ("true", "1"):
        serverapp.log.warning("coursehub: the formgrader is a whole Jupyter server (full server)")
        return
    allowed = "|".join(re.escape(p) for p in ALLOWED_PREFIXES)
    pattern = re.escape(base_url.rstrip("/")) + rf"/(?!(?:{allowed})(?:/|$)).+"
    webapp.add_handlers(".*$", [(pattern, RefusedHandler)])
    serverapp.log.info("coursehub: the formgrader serves %sformgrader only", base_url)
