"""A course's book in the course app: served at ``/courses/<course_id>/book/<path>``, built
on demand.

The pages are the static files of the book's last good build
(:mod:`coursehub.books`), sent with :func:`flask.send_from_directory`
(``werkzeug.security.safe_join``: no ``..``, no absolute path) and only if
their real path stays inside the build (no symbolic link out). Members of the
course read them; anyone, signed in or not, once the course marks its book
public. Every page is sent with ``Content-Security-Policy: sandbox ...``
(https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy/sandbox):
a book's scripts run in an opaque origin, so they never act with the
reader's session in the course app. An opaque origin's sub-resource requests
carry no ``SameSite=Lax`` session cookie either, so the book's other files
(style sheets, scripts, images, fonts) are served without a session at
``/courses/<course_id>/book-files/<key>/<path>`` (:func:`files`), ``key``
an HMAC of the course and the build served (:func:`plan_files_key`), and
each page's relative links to them are rewritten there
(:func:`plan_rewrite_links`). "Build book" (the teaching team)
starts a detached build (:func:`coursehub.books.background.start_build`),
never a build inside the request.
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath
import re
from pathlib import Path, PurePosixPath
from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    send_from_directory,
    url_for,
)
from werkzeug.security import safe_join
from werkzeug.wrappers import Response

from coursehub.books.background import start_build
from coursehub.books.build import is_building, served_build
from coursehub.books.plan import plan_view
from coursehub.books.settings import (
    BookPaths,
    books_root,
    read_settings,
    read_state,
    write_settings,
)
from coursehub.contract import SANDBOX_CSP
from coursehub.errors import CoursehubError
from coursehub.resources.processes import pid_running
from coursehub.web.access import Access, require
from coursehub.web.coursepage import load_course_access
from coursehub.web.database import get_session
from coursehub.web.views.base import back_to_course, load_course

bp = Blueprint("books", __name__)

#: The sandbox of every book page: scripts, forms and pop-ups, never the app's origin.
BOOK_CSP = SANDBOX_CSP
#: Suffixes of a book's pages: served under ``/book/`` only (members, or anyone when public).
PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".xht")
#: ``src=`` and ``href=`` attributes of a page (the link, then its query or fragment).
_LINK = re.compile(r"""(\s(?:src|href)\s*=\s*)(["'])([^"'#?]*)([^"']*)\2""", re.IGNORECASE)
#: Characters of the log shown on the log page (its end).
LOG_TAIL_CHARS = 20000


def book_paths(course_id: str) -> BookPaths:
    """The course's book folders: the app's ``BOOKS_DIR`` (``COURSEHUB_BOOKS_DIR``), else the
    default."""
    configured = current_app.config.get("BOOKS_DIR")
    return BookPaths(Path(configured) if configured else books_root(), course_id)


@bp.app_template_global("course_book")
def course_book(course_id: str) -> dict[str, Any]:
    """The book's state for the course page: ``state``, times, ``error``, ``public``, ``served``."""
    paths = book_paths(course_id)
    state = read_state(paths)
    view = plan_view(state, is_building(paths), pid_running(state.get("pid")))
    try:
        view["public"] = read_settings(paths).public
    except CoursehubError as exc:
        view["public"], view["settings_error"] = False, str(exc)
    view["served"] = paths.current.is_dir()
    return view


def plan_files_key(secret: str | bytes, course_id: str, build_id: str) -> str:
    """Return the unguessable part of the address of a build's files (pure).

    HMAC-SHA256 of ``course_id`` and ``build_id`` with the app's
    ``SECRET_KEY``, 32 hex digits: a new build gets a new address.
    """
    key = secret.encode() if isinstance(secret, str) else secret
    message = f"book-files\0{course_id}\0{build_id}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def is_page(path: str) -> bool:
    """True if ``path`` names a page of the book (an HTML file, or a folder's index)."""
    return not path or path.endswith("/") or PurePosixPath(path).suffix.lower() in PAGE_SUFFIXES


def plan_rewrite_links(html: str, page: str, files_base: str) -> str:
    """Point a page's relative links to files that are not pages at ``files_base`` (pure).

    Parameters
    ----------
    html
        The page.
    page
        Its path in the book (``chapters/one.html``).
    files_base
        The address of the build's files, ending with ``/``.

    Links with a scheme, absolute paths, links to pages (:func:`is_page`), to
    folders, without a suffix or climbing out of the book are left as they are.
    """
    folder = posixpath.dirname(page)

    def rewrite(match: re.Match[str]) -> str:
        attr, quote, url, rest = match.groups()
        if not url or url.startswith("/") or ":" in url.split("/", 1)[0] or is_page(url):
            return match.group(0)
        if not PurePosixPath(url).suffix:
            return match.group(0)
        target = posixpath.normpath(posixpath.join(folder, url))
        if target == ".." or target.startswith("../"):
            return match.group(0)
        return f"{attr}{quote}{files_base}{target}{rest}{quote}"

    return _LINK.sub(rewrite, html)


def _book_file(base: Path, path: str) -> Path | None:
    """The file ``path`` of the book at ``base``, if it is one and stays inside it."""
    joined = safe_join(str(base), path) if path else str(base)
    if joined is None:
        return None
    target = Path(joined).resolve()
    if not target.is_relative_to(base):
        return None  # a symbolic link out of the book
    return target


@bp.get("/courses/<course_id>/book-files/<key>/<path:path>")
def files(course_id: str, key: str, path: str) -> Response:
    """A file of the built book that is not a page, to anyone holding the build's key.

    No session (the book's pages are an opaque origin, which sends no
    cookie), no page, no folder, nothing outside the build served now.
    """
    try:
        paths = book_paths(course_id)
    except CoursehubError:
        abort(404)
    build_id = served_build(paths)
    secret = current_app.config["SECRET_KEY"]
    if build_id is None or not hmac.compare_digest(
        key, plan_files_key(secret, paths.course_id, build_id)
    ):
        abort(404)
    if is_page(path) or not paths.current.is_dir():
        abort(404)
    base = paths.current.resolve()
    target = _book_file(base, path)
    if target is None or not target.is_file():
        abort(404)
    response = send_from_directory(base, target.relative_to(base).as_posix(), max_age=3600)
    response.headers["Content-Security-Policy"] = BOOK_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    # fonts and module scripts are fetched in CORS mode by the pages' opaque origin ("null")
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Cache-Control"] = "private, max-age=3600"
    return response


@bp.get("/courses/<course_id>/book")
def root(course_id: str) -> Response:
    """``/book`` -> ``/book/`` (the book's relative links need the slash)."""
    return redirect(url_for("books.page", course_id=course_id, path=""))


@bp.get("/courses/<course_id>/book/", defaults={"path": ""})
@bp.get("/courses/<course_id>/book/<path:path>")
def page(course_id: str, path: str) -> Response:
    """A file of the course's book: to members, or to anyone when the book is public."""
    identity = g.get("identity")
    seen = load_course_access(get_session(), course_id, identity)
    paths = book_paths(seen.course.course_id)
    public = _public(paths)
    if not public:
        if identity is None:
            return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
        require(seen.access, Access.VIEW)
    if not paths.current.is_dir():
        abort(404, description=f"course {course_id} has no book yet")
    base = paths.current.resolve()
    found = _book_file(base, path)
    if found is None:
        abort(404)
    target = found
    if target.is_dir():
        if path and not path.endswith("/"):
            return redirect(url_for("books.page", course_id=course_id, path=path + "/"))
        target = target / "index.html"
    if not target.is_file():
        abort(404, description=f"the book of {course_id} has no page {path}")
    relative = target.relative_to(base).as_posix()
    build_id = served_build(paths)
    response: Response
    if is_page(relative) and build_id is not None:
        key = plan_files_key(current_app.config["SECRET_KEY"], paths.course_id, build_id)
        files_base = url_for("books.files", course_id=paths.course_id, key=key, path="x")[:-1]
        text = target.read_text(encoding="utf-8", errors="replace")
        html = plan_rewrite_links(text, relative, files_base)
        response = current_app.response_class(html, mimetype="text/html")
    else:
        response = send_from_directory(base, relative)
    response.headers["Content-Security-Policy"] = BOOK_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    if not public:
        response.headers["Cache-Control"] = "private, no-cache"
    return response


def _public(paths: BookPaths) -> bool:
    try:
        return read_settings(paths).public
    except CoursehubError:
        return False  # unreadable settings: members only


@bp.post("/courses/<course_id>/book/build")
def build(course_id: str) -> Response:
    """Start a build in the background (the teaching team); the page shows its state."""
    course, _access = load_course(course_id, Access.READ_ROSTER)
    material = current_app.config.get("MATERIAL_DIR")
    shared = current_app.config.get("SHARED_ROOT")
    started = start_build(
        book_paths(course.course_id),
        material_dir=Path(material) if material else None,
        shared_root=Path(shared) if shared else None,
    )
    if not started:
        flash(f"a build of {course.course_id}'s book is already running", "error")
        return redirect(url_for("courses.show", course_id=course.course_id))
    return back_to_course(course, "Book build started; this page shows its state.")


@bp.post("/courses/<course_id>/book/public")
def set_public(course_id: str) -> Response:
    """Serve the book to anyone (``public=1``) or to members only (the lead and teachers)."""
    course, _access = load_course(course_id, Access.MANAGE)
    paths = book_paths(course.course_id)
    from dataclasses import replace

    public = request.form.get("public") == "1"
    write_settings(paths, replace(read_settings(paths), public=public))
    who = "anyone" if public else "the course's members only"
    return back_to_course(course, f"The book is now served to {who}.")


@bp.get("/courses/<course_id>/book-log")
def log(course_id: str) -> str:
    """The last build's state and the end of its log (the teaching team)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    paths = book_paths(course.course_id)
    state = course_book(course.course_id)
    text = ""
    log_path = Path(str(state.get("log") or ""))
    if log_path.name and log_path.parent == paths.logs:
        try:
            text = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            text = ""
    return render_template("books/log.html", course=course, access=access, book=state, log=text)
