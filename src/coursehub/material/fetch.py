"""Fetch the teacher's branch into a course's private mirror (steps 1 of :mod:`.mirror`).

The host is checked again and pinned, no redirect followed, the course's
credential given only to the host it was given for; a failed fetch removes
its partial files, and one that ran out of space is retried with the
branch's last commit alone (``--depth=1``).
"""

from __future__ import annotations

import ipaddress
import logging
import shutil
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.material.credential import plan_credential_env, stored_host
from coursehub.material.gitcmd import (
    FETCH_TIMEOUT_S,
    GitCommandError,
    explain_git_error,
    plan_git_env,
    plan_local_git_env,
    rev_parse,
    run_git,
)
from coursehub.material.hosts import HostPolicy, Origin, Resolver, check_repo_host, repo_origin
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirrortypes import MaterialError, MirrorSource, still_served

log = logging.getLogger(__name__)


FETCHED_REF = "refs/coursehub/fetched"


def fetch_branch(
    layout: MaterialLayout, source: MirrorSource, hosts: HostPolicy | None, resolver: Resolver
) -> tuple[str, bool]:
    """Fetch the branch into the private mirror; return its commit and whether depth 1 was used.

    The mirror is made if missing; the fetch goes to ``refs/coursehub/fetched``
    (:data:`FETCHED_REF`).

    Raises
    ------
    MaterialError
        A host the site does not allow, a credential given for another host,
        or a fetch that failed (explained by
        :func:`coursehub.material.gitcmd.explain_git_error`, or out of space).
    """
    upstream = layout.upstream(source.course_id)
    local = plan_local_git_env(layout.home)
    if not (upstream / "HEAD").exists():
        run_git(["init", "--bare", "--quiet", "--template=", str(upstream)], local)
    remove_fetch_garbage(upstream)  # what an update killed on the way left
    origin, addresses, given_for = _check_origin(layout, source, hosts, resolver)
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
    try:
        shallow = _run_fetch(args, env, upstream, local, source)
    except GitCommandError as exc:
        log.warning("fetching %s for %s failed: %s", source.url, source.course_id, exc.stderr)
        full = ran_out_of_space(exc.stderr, upstream)  # before the partial files go
        removed = remove_fetch_garbage(upstream, local)
        if removed:
            log.info("removed %d partial files of the failed fetch", len(removed))
        reason = _explain_failed_fetch(exc, source, origin, addresses, env)
        if full:
            reason = (
                f"{layout.root} ran out of space fetching {source.url} (branch "
                f"{source.branch}: even its last commit alone does not fit): free space there "
                "or make the material smaller"
            )
        raise MaterialError(still_served(reason)) from None
    return rev_parse(upstream, FETCHED_REF, local), shallow


def _check_origin(
    layout: MaterialLayout, source: MirrorSource, hosts: HostPolicy | None, resolver: Resolver
) -> tuple[Origin, list[str], Origin]:
    """Return the repository's origin, its checked addresses and the credential's host.

    Raises
    ------
    MaterialError
        If the site does not allow the host, or the course's credential was
        given for another host.
    """
    try:
        addresses = check_repo_host(source.url, hosts, resolver)
    except CoursehubError as exc:
        raise MaterialError(still_served(str(exc))) from None
    origin = repo_origin(source.url)
    given_for = stored_host(layout, source.course_id) or origin  # older files: the course's URL
    if source.credential and given_for != origin:
        raise MaterialError(
            still_served(
                f"the course's {source.credential} was given for {given_for}, not {origin}: "
                f"set it again (coursehub material set {source.course_id} --credential FILE)"
            )
        )
    return origin, addresses, given_for


def _run_fetch(
    args: list[str],
    env: dict[str, str],
    upstream: Path,
    local: dict[str, str],
    source: MirrorSource,
) -> bool:
    """Run the fetch ``args``; out of space, once more with ``--depth=1``. True if shallow.

    Raises
    ------
    GitCommandError
        If the fetch failed otherwise, or the shallow fetch failed too.
    """
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
        return True
    return False


def _explain_failed_fetch(
    exc: GitCommandError,
    source: MirrorSource,
    origin: Origin,
    addresses: list[str],
    env: dict[str, str],
) -> str:
    """Return why the fetch failed, in one line; a missing branch is told from no repository.

    On "couldn't find remote ref", ``git ls-remote`` says whether the URL
    serves any branch at all (any web server answers 200 to git's "dumb" HTTP).
    """
    branches = True
    if "couldn't find remote ref" in exc.stderr.lower():
        # a real repository, or any web server answering 200 (git's "dumb" HTTP)?
        listing = [*plan_fetch_config(origin, addresses), "ls-remote", "--heads", "--"]
        done = run_git([*listing, source.url], env, timeout=FETCH_TIMEOUT_S, check=False)
        branches = done.returncode == 0 and bool(done.stdout.strip())
    return explain_git_error(exc.stderr, source.url, source.branch, source.credential, branches)


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
