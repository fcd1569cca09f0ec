"""Update a course's mirror: fetch the teacher's branch, check it, publish the course's folder.

:func:`update_mirror`, under an exclusive lock per course:

1. check the repository's host again (the site's allowed hosts,
   :mod:`coursehub.material.hosts`) and fetch ``branch`` into the private
   bare mirror (``refs/coursehub/fetched``) from the addresses just checked
   (``http.curloptResolve``, ssh's ``HostName``), no redirect followed
   (``http.followRedirects=false``), with the course's credential only if the
   URL is on the host it was given for; a failed fetch removes what it wrote
   (git's ``tmp_obj_*``/``tmp_pack_*`` files, then ``git prune``), so a full
   disk does not stay full; when it ran out of space
   (:func:`ran_out_of_space`), the branch's last commit alone is fetched
   once more (``git fetch --depth=1``): a big file that the teacher removed
   again stays in their history, which no longer has to fit (students get
   trees, never the teacher's history: step 4). The mirror is then shallow
   and step 2 is skipped for this update (the result's ``note`` says so);
2. refuse a force-pushed branch (the last good commit is no longer an
   ancestor, ``git merge-base --is-ancestor``) unless ``accept_rewrite``;
3. find the folder's tree (``git cat-file -t COMMIT:FOLDER`` is ``tree``);
4. publish: set who may read the published repository (the course's
   Unix groups, :mod:`coursehub.material.access`); when the tree differs
   from the published head, make a commit of that tree whose parent is
   the published head (``git commit-tree``) and push it to the published
   repository (a fast-forward). The students' history is append-only
   whatever the teacher does to theirs, so nbgitpuller's merge
   (``git merge -Xours``) always has a common ancestor.

Any failure raises :class:`MaterialError` before step 4's push: the
published repository, the last good material, is left as it was and still
served.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import logging
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.errors import CoursehubError
from coursehub.material.access import (
    MaterialAccessError,
    apply_published_access,
    describe_access,
    plan_published_access,
)
from coursehub.material.credential import plan_credential_env, stored_host
from coursehub.material.gitcmd import (
    FETCH_TIMEOUT_S,
    GitCommandError,
    explain_git_error,
    plan_git_env,
    run_git,
)
from coursehub.material.hosts import (
    HostPolicy,
    Origin,
    Resolver,
    check_repo_host,
    repo_origin,
    resolve,
)
from coursehub.material.layout import MaterialLayout, render_gitconfig

log = logging.getLogger(__name__)

#: Branch of the published repository (:data:`coursehub.catalog.material.PUBLISHED_BRANCH`).
PUBLISHED_REF = "refs/heads/main"
FETCHED_REF = "refs/coursehub/fetched"
LAST_GOOD_REF = "refs/coursehub/last-good"
PUBLISHED_COPY_REF = "refs/coursehub/published"


class MaterialError(CoursehubError):
    """An update that failed; the message says why and that the last good material stays."""


class UpdateRunningError(CoursehubError):
    """Another update of the same course holds its lock."""


@dataclass(frozen=True)
class MirrorSource:
    """What to mirror: the course, the teacher's repository, branch and folder, credential kind."""

    course_id: str
    url: str
    branch: str
    subdir: str
    credential: str = ""


@dataclass(frozen=True)
class MirrorResult:
    """A good update: the teacher's ``commit``, the ``published`` commit, its ``pull_url``,
    who may read it (``access``, :func:`coursehub.material.access.describe_access`) and
    what the teacher should know (``note``: the history was not checked)."""

    commit: str
    published: str
    pull_url: str
    changed: bool
    access: str = ""
    note: str = ""


@contextlib.contextmanager
def course_lock(layout: MaterialLayout, course_id: str) -> Iterator[None]:
    """Hold the course's update lock (``flock``); raise :class:`UpdateRunningError` if taken."""
    with open(layout.lock(course_id), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UpdateRunningError(
                f"an update of {course_id}'s material is already running"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_mirror(
    layout: MaterialLayout,
    source: MirrorSource,
    last_commit: str = "",
    accept_rewrite: bool = False,
    hosts: HostPolicy | None = None,
    resolver: Resolver = resolve,
) -> MirrorResult:
    """Fetch, check and publish the material of ``source.course_id`` (see the module).

    Parameters
    ----------
    layout
        Where the mirrors live (created if missing).
    source
        The repository to mirror.
    last_commit
        The teacher's commit of the last good update from this same source
        ("" for none or another source): a new head that does not contain it
        is a rewritten (force-pushed) branch.
    accept_rewrite
        Publish a rewritten branch anyway (on top of the students' history).
    hosts, resolver
        The site's allowed hosts (default ``COURSEHUB_MATERIAL_HOSTS``) and the
        name resolver (:func:`coursehub.material.hosts.check_repo_host`).

    Raises
    ------
    MaterialError
        A host the site does not allow, unreachable repository, refused
        credential, missing branch or folder, rewritten branch: the message
        says which, and that the last good material is still served.
    UpdateRunningError
        If another update of the course is running.
    """
    layout.ensure()
    with course_lock(layout, source.course_id):
        commit, shallow = _fetch(layout, source, hosts, resolver)
        note = ""
        if shallow:
            note = (
                f"the branch's history does not fit in {layout.root}: its last commit only "
                "was fetched, and whether the branch was rewritten was not checked"
            )
        elif last_commit and not accept_rewrite:
            _check_not_rewritten(layout, source, last_commit, commit)
        tree = _folder_tree(layout, source, commit)
        return replace(_publish(layout, source, commit, tree), note=note)


def _local_env(layout: MaterialLayout) -> dict[str, str]:
    return plan_git_env(layout.home, protocols="file")


def _fetch(
    layout: MaterialLayout, source: MirrorSource, hosts: HostPolicy | None, resolver: Resolver
) -> tuple[str, bool]:
    """Fetch the branch into the private mirror; return its commit and whether depth 1 was used."""
    upstream = layout.upstream(source.course_id)
    local = _local_env(layout)
    if not (upstream / "HEAD").exists():
        run_git(["init", "--bare", "--quiet", "--template=", str(upstream)], local)
    remove_fetch_garbage(upstream)  # what an update killed on the way left
    try:
        addresses = check_repo_host(source.url, hosts, resolver)
    except CoursehubError as exc:
        raise MaterialError(_kept(str(exc))) from None
    origin = repo_origin(source.url)
    given_for = stored_host(layout, source.course_id) or origin  # older files: the course's URL
    if source.credential and given_for != origin:
        raise MaterialError(
            _kept(
                f"the course's {source.credential} was given for {given_for}, not {origin}: "
                f"set it again (coursehub material set {source.course_id} --credential FILE)"
            )
        )
    ssh_address = addresses[0] if origin.scheme == "ssh" and addresses else ""
    extra = plan_credential_env(layout, source.course_id, source.credential, given_for, ssh_address)
    env = plan_git_env(layout.home, extra)
    refspec = f"+refs/heads/{source.branch}:{FETCHED_REF}"
    args = [
        *plan_fetch_config(origin, addresses),
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        "--",
        source.url,
        refspec,
    ]
    shallow = False
    try:
        try:
            run_git(args, env, cwd=upstream, timeout=FETCH_TIMEOUT_S)
        except GitCommandError as exc:
            if not ran_out_of_space(exc.stderr, upstream):
                raise
            log.warning("fetching %s for %s: out of space", source.url, source.course_id)
            remove_fetch_garbage(upstream, local)
            depth_one = [
                *args[: args.index("fetch") + 1],
                "--depth=1",
                *args[args.index("fetch") + 1 :],
            ]
            run_git(depth_one, env, cwd=upstream, timeout=FETCH_TIMEOUT_S)
            shallow = True
    except GitCommandError as exc:
        log.warning("fetching %s for %s failed: %s", source.url, source.course_id, exc.stderr)
        full = ran_out_of_space(exc.stderr, upstream)  # before the partial files go
        removed = remove_fetch_garbage(upstream, local)
        if removed:
            log.info("removed %d partial files of the failed fetch", len(removed))
        branches = True
        if "couldn't find remote ref" in exc.stderr.lower():
            # a real repository, or any web server answering 200 (git's "dumb" HTTP)?
            listing = [*plan_fetch_config(origin, addresses), "ls-remote", "--heads", "--"]
            done = run_git([*listing, source.url], env, timeout=FETCH_TIMEOUT_S, check=False)
            branches = done.returncode == 0 and bool(done.stdout.strip())
        reason = explain_git_error(
            exc.stderr, source.url, source.branch, source.credential, branches
        )
        if full:
            reason = (
                f"{layout.root} ran out of space fetching {source.url} (branch "
                f"{source.branch}: even its last commit alone does not fit): free space there "
                "or make the material smaller"
            )
        raise MaterialError(_kept(reason)) from None
    return _rev(upstream, FETCHED_REF, local), shallow


#: What git writes when a fetch runs out of space (its own messages and strerror's).
OUT_OF_SPACE_MARKERS = ("no space left on device", "disk quota exceeded")
#: Below this many free bytes, a fetch whose unpacking failed ran out of space.
LOW_SPACE_BYTES = 1 << 20


def ran_out_of_space(stderr: str, repo: Path) -> bool:
    """Return whether a failed fetch into ``repo`` ran out of disk space or quota.

    Git says so (ENOSPC or EDQUOT's text, :data:`OUT_OF_SPACE_MARKERS`),
    or only that unpacking failed (``unpack-objects failed``, ``index-pack
    failed``) while the file system of ``repo`` has less than
    :data:`LOW_SPACE_BYTES` left (its partial files are still there).
    """
    text = stderr.lower()
    if any(marker in text for marker in OUT_OF_SPACE_MARKERS):
        return True
    if "unpack-objects failed" in text or "index-pack failed" in text:
        return shutil.disk_usage(repo).free < LOW_SPACE_BYTES
    return False


def plan_fetch_config(origin: Origin, addresses: list[str]) -> list[str]:
    """git's ``-c`` options of a fetch from ``origin`` (pure): redirects not followed and, for
    a host name over http(s), libcurl pinned to its checked ``addresses``
    (``http.curloptResolve``, ``git help config``)."""
    options = ["-c", "http.followRedirects=false"]
    if origin.scheme in ("http", "https") and addresses and not _is_address(origin.host):
        pinned = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
        options += ["-c", f"http.curloptResolve={origin.host}:{origin.port}:{pinned}"]
    return options


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def is_fetch_garbage(name: str) -> bool:
    """Whether ``name`` (a path below a repository's ``objects/``) is a fetch's partial file
    (pure): ``xx/tmp_obj_*`` (unpack-objects), ``pack/tmp_*`` and ``pack/.tmp-*``
    (index-pack), ``incoming-*`` (a quarantine folder)."""
    parts = name.split("/")
    if len(parts) == 1:
        return parts[0].startswith("incoming-")
    if len(parts) != 2:
        return False
    folder, file = parts
    if folder == "pack":
        return file.startswith(("tmp_", ".tmp-"))
    return len(folder) == 2 and file.startswith("tmp_obj_")


def remove_fetch_garbage(repo: Path, prune_env: dict[str, str] | None = None) -> list[str]:
    """Remove the partial files a failed fetch left in ``repo`` (:func:`is_fetch_garbage`);
    with ``prune_env`` (git's environment), also its complete but unreachable objects
    (``git prune --expire=now``; the caller holds the course's lock). Returns the names
    removed."""
    objects = repo / "objects"
    removed = []
    candidates = [*objects.glob("incoming-*"), *objects.glob("*/tmp_*"), *objects.glob("*/.tmp-*")]
    for path in candidates:
        name = path.relative_to(objects).as_posix()
        if not is_fetch_garbage(name):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(name)
    if prune_env is not None and (repo / "HEAD").exists():
        run_git(["prune", "--expire=now"], prune_env, cwd=repo, check=False)
    return removed


def _check_not_rewritten(
    layout: MaterialLayout, source: MirrorSource, last_commit: str, commit: str
) -> None:
    upstream = layout.upstream(source.course_id)
    if last_commit == commit:
        return
    done = run_git(
        ["merge-base", "--is-ancestor", last_commit, commit],
        _local_env(layout),
        cwd=upstream,
        check=False,
    )
    if done.returncode == 1:
        raise MaterialError(
            _kept(
                f"branch {source.branch} of {source.url} was force-pushed: its head "
                f"{commit[:12]} no longer contains the last published commit {last_commit[:12]}; "
                f"to publish the new history run 'coursehub material update {source.course_id} "
                "--accept-rewrite' (students keep their own edits)"
            )
        )
    # other status: the last commit is unknown here (a mirror made anew): nothing to compare


def _folder_tree(layout: MaterialLayout, source: MirrorSource, commit: str) -> str:
    upstream = layout.upstream(source.course_id)
    env = _local_env(layout)
    name = f"{commit}:{source.subdir}" if source.subdir else f"{commit}^{{tree}}"
    done = run_git(["cat-file", "-t", name], env, cwd=upstream, check=False)
    if done.returncode != 0 or done.stdout.strip() != "tree":
        raise MaterialError(
            _kept(
                f"folder {source.subdir!r} does not exist on branch {source.branch} "
                f"of {source.url} (commit {commit[:12]})"
            )
        )
    return _rev(upstream, name, env)


def _publish(layout: MaterialLayout, source: MirrorSource, commit: str, tree: str) -> MirrorResult:
    upstream = layout.upstream(source.course_id)
    published = layout.published_repo(source.course_id)
    env = _local_env(layout)
    if not (published / "HEAD").exists():
        run_git(["init", "--bare", "--quiet", "--template=", "--shared=0644", str(published)], env)
        run_git(["symbolic-ref", "HEAD", PUBLISHED_REF], env, cwd=published)
        repositories = [p.resolve() for p in layout.published.glob("*.git")]
        write_atomically(layout.gitconfig, render_gitconfig(repositories), mode=0o644)
    access = plan_published_access(source.course_id)
    try:  # each update: the course's groups may have been made since the last one
        apply_published_access(published, access)
    except MaterialAccessError as exc:
        raise MaterialError(_kept(str(exc))) from None
    readers = describe_access(access)
    head = _rev(published, PUBLISHED_REF, env, missing_ok=True)
    if head:
        run_git(
            ["fetch", "--quiet", "--", str(published), f"+{PUBLISHED_REF}:{PUBLISHED_COPY_REF}"],
            env,
            cwd=upstream,
        )
        if _rev(upstream, f"{head}^{{tree}}", env) == tree:
            run_git(["update-ref", LAST_GOOD_REF, commit], env, cwd=upstream)
            pull_url = layout.pull_url(source.course_id)
            return MirrorResult(commit, head, pull_url, changed=False, access=readers)
    message = (
        f"{source.course_id}: material from branch {source.branch}"
        f"{', folder ' + source.subdir if source.subdir else ''}\n\nSource commit: {commit}\n"
    )
    parents = ["-p", head] if head else []
    new = run_git(["commit-tree", tree, *parents, "-m", message], env, cwd=upstream).stdout.strip()
    run_git(["push", "--quiet", "--", str(published), f"{new}:{PUBLISHED_REF}"], env, cwd=upstream)
    run_git(["update-ref", LAST_GOOD_REF, commit], env, cwd=upstream)
    return MirrorResult(commit, new, layout.pull_url(source.course_id), True, readers)


def _rev(repo: Path, name: str, env: dict[str, str], missing_ok: bool = False) -> str:
    done = run_git(["rev-parse", "--verify", "--quiet", name], env, cwd=repo, check=not missing_ok)
    return done.stdout.strip() if done.returncode == 0 else ""


def _kept(reason: str) -> str:
    return f"{reason}; the last good material is still served"


def published_head(layout: MaterialLayout, course_id: str) -> str:
    """The commit students get now ("" before the first good update)."""
    published = layout.published_repo(course_id)
    if not (published / "HEAD").exists():
        return ""
    try:
        return _rev(published, PUBLISHED_REF, _local_env(layout), missing_ok=True)
    except (GitCommandError, subprocess.SubprocessError):
        return ""


#: Largest file :func:`read_published_file` returns (a requirements file is a few KiB).
MAX_PUBLISHED_FILE_BYTES = 256 * 1024


def read_published_file(
    layout: MaterialLayout, course_id: str, name: str
) -> tuple[str, str] | None:
    """Return ``(text, commit)`` of the file ``name`` at the root of the course's published
    material (the root of its sub-folder), or None when there is no such file or material.

    Read from the published repository's head (``git cat-file``), the last good
    material: what the course's students have.

    Raises
    ------
    MaterialError
        If the file is larger than :data:`MAX_PUBLISHED_FILE_BYTES` or not UTF-8.
    """
    commit = published_head(layout, course_id)
    if not commit or "/" in name or name in ("", ".", ".."):
        return None
    repo, env = layout.published_repo(course_id), _local_env(layout)
    size = run_git(["cat-file", "-s", f"{commit}:{name}"], env, cwd=repo, check=False)
    kind = run_git(["cat-file", "-t", f"{commit}:{name}"], env, cwd=repo, check=False)
    if size.returncode != 0 or kind.stdout.strip() != "blob":
        return None
    where = f"{name} of {course_id}'s material (commit {commit[:12]})"
    if int(size.stdout) > MAX_PUBLISHED_FILE_BYTES:
        raise MaterialError(f"{where} is larger than {MAX_PUBLISHED_FILE_BYTES} bytes")
    blob = subprocess.run(
        ["git", "cat-file", "blob", f"{commit}:{name}"],
        env=env,
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    try:
        return blob.decode("utf-8"), commit
    except UnicodeDecodeError:
        raise MaterialError(f"{where} is not UTF-8 text") from None
