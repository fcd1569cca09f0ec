"""A book build's source: copied from the course's material or folder, then checked.

:func:`book_source_dir` is the one place that decides where a book comes from
(docs/books.md); :func:`check_book` checks its Jupyter Book configuration and
table of contents before anything runs.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursehub.books.bookconfig import CONFIG_FILE
from coursehub.books.plan import (
    TOC_FILE,
    plan_links_out,
    plan_missing_pages,
    render_links_out,
    render_missing,
)
from coursehub.books.settings import BookError, BookSettings


@dataclass(frozen=True)
class BookSource:
    """Where a build's book came from: ``kind`` ``material`` (at ``commit``) or ``folder``."""

    book: Path
    kind: str
    commit: str = ""
    folder: str = ""

    def describe(self) -> str:
        """``"material commit 1a2b3c4d5e6f"`` or ``"folder /srv/book-source"``."""
        if self.kind == "material":
            return f"material commit {self.commit[:12]}"
        return f"folder {self.folder}"


def _links_of_tar(members: list[tarfile.TarInfo]) -> list[tuple[str, str]]:
    """The symbolic links of an archive (hard links: tar's ``data`` filter keeps them inside)."""
    return [(m.name, m.linkname) for m in members if m.issym()]


def _links_of_folder(root: Path) -> list[tuple[str, str]]:
    links = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                links.append((path.relative_to(root).as_posix(), os.readlink(path)))
    return links


def book_source_dir(
    course_id: str, settings: BookSettings, dest: Path, material_dir: Path | None = None
) -> BookSource:
    """Copy the course's book source into ``dest``; return where it came from.

    The one place that decides where a book comes from (docs/books.md): the
    course's published material (:mod:`coursehub.material`) at its head
    when it has one, extracted with ``git archive``; else the settings'
    ``source_dir`` (a host folder, copied). The book is ``dest /
    settings.folder``. A symbolic link pointing outside the book
    (:func:`coursehub.books.plan.plan_links_out`) refuses the build; none
    is ever followed.

    Raises
    ------
    BookError
        If the course has neither published material nor a source folder, the
        material cannot be read, or the source holds a link out of the book.
    """
    from coursehub.material.layout import MaterialLayout, material_root
    from coursehub.material.publish import published_head

    layout = MaterialLayout(material_dir or material_root())
    commit = published_head(layout, course_id)
    if not commit and settings.source_dir:
        source = Path(settings.source_dir)
        if not source.is_dir():
            raise BookError(f"the book's source folder {source} does not exist")
        out = plan_links_out(_links_of_folder(source), settings.folder)
        if out:
            raise BookError(render_links_out(out))
        shutil.copytree(
            source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "_build")
        )
        return BookSource(dest / settings.folder, "folder", folder=str(source))
    if not commit:
        raise BookError(
            f"course {course_id} has no material yet (set its repository with "
            f"`coursehub material set`, or a source folder with `coursehub book settings "
            f"{course_id} --source-dir DIR`)"
        )
    from coursehub.material.gitcmd import plan_local_git_env

    git_dir = str(layout.published_repo(course_id))
    done = subprocess.run(
        ["git", "--git-dir", git_dir, "archive", "--format=tar", commit],
        env=plan_local_git_env(layout.home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise BookError(f"reading the material of {course_id}: {done.stderr.decode()[-300:]}")
    dest.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            out = plan_links_out(_links_of_tar(archive.getmembers()), settings.folder)
            if out:
                raise BookError(render_links_out(out))
            archive.extractall(dest, filter="data")
    except tarfile.TarError as exc:  # the data filter's refusals (a special file...)
        raise BookError(f"the material of {course_id} cannot be extracted: {exc}") from None
    return BookSource(dest / settings.folder, "material", commit=commit)


def check_book(book: Path, where: str) -> dict[str, Any]:
    """Check the book's configuration and table of contents; return its configuration.

    Raises
    ------
    BookError
        No folder, no ``_config.yml`` or ``_toc.yml``, unreadable YAML, or a
        table of contents naming a page that is not there.
    """
    import yaml
    from sphinx_external_toc.parsing import MalformedError, parse_toc_yaml

    if not book.is_dir():
        raise BookError(f"the material has no {where} (the book folder of its settings)")
    for name in (CONFIG_FILE, TOC_FILE):
        if not (book / name).is_file():
            raise BookError(
                f"no Jupyter Book configuration: {where} has no {name} "
                "(set the book's folder with `coursehub book settings COURSE_ID --folder DIR`)"
            )
    try:
        site_map = parse_toc_yaml(book / TOC_FILE)
    except (MalformedError, yaml.YAMLError) as exc:
        raise BookError(f"{TOC_FILE} in {where} is not a valid table of contents: {exc}") from None
    files = {p.relative_to(book).as_posix() for p in book.rglob("*") if p.is_file()}
    missing = plan_missing_pages(list(site_map), files)
    if missing:
        raise BookError(render_missing(missing, where))
    try:
        config = yaml.safe_load((book / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BookError(f"{CONFIG_FILE} in {where} is not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise BookError(f"{CONFIG_FILE} in {where} must be a YAML mapping")
    return config
