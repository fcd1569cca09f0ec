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

Any failure raises :class:`~coursehub.material.mirrortypes.MaterialError`
before step 4's push: the published repository, the last good material, is
left as it was and still served. Step 1 is :mod:`coursehub.material.fetch`,
step 4 and reading the published material back :mod:`coursehub.material.publish`.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import replace

from coursehub.material.fetch import fetch_branch
from coursehub.material.gitcmd import plan_local_git_env, rev_parse, run_git
from coursehub.material.hosts import HostPolicy, Resolver, resolve
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirrortypes import (
    MaterialError,
    MirrorResult,
    MirrorSource,
    UpdateRunningError,
    still_served,
)
from coursehub.material.publish import publish_tree


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
        commit, shallow = fetch_branch(layout, source, hosts, resolver)
        note = ""
        if shallow:
            note = (
                f"the branch's history does not fit in {layout.root}: its last commit only "
                "was fetched, and whether the branch was rewritten was not checked"
            )
        elif last_commit and not accept_rewrite:
            _check_not_rewritten(layout, source, last_commit, commit)
        tree = _folder_tree(layout, source, commit)
        return replace(publish_tree(layout, source, commit, tree), note=note)


def _check_not_rewritten(
    layout: MaterialLayout, source: MirrorSource, last_commit: str, commit: str
) -> None:
    upstream = layout.upstream(source.course_id)
    if last_commit == commit:
        return
    done = run_git(
        ["merge-base", "--is-ancestor", last_commit, commit],
        plan_local_git_env(layout.home),
        cwd=upstream,
        check=False,
    )
    if done.returncode == 1:
        raise MaterialError(
            still_served(
                f"branch {source.branch} of {source.url} was force-pushed: its head "
                f"{commit[:12]} no longer contains the last published commit {last_commit[:12]}; "
                f"to publish the new history run 'coursehub material update {source.course_id} "
                "--accept-rewrite' (students keep their own edits)"
            )
        )


def _folder_tree(layout: MaterialLayout, source: MirrorSource, commit: str) -> str:
    upstream = layout.upstream(source.course_id)
    env = plan_local_git_env(layout.home)
    name = f"{commit}:{source.subdir}" if source.subdir else f"{commit}^{{tree}}"
    done = run_git(["cat-file", "-t", name], env, cwd=upstream, check=False)
    if done.returncode != 0 or done.stdout.strip() != "tree":
        raise MaterialError(
            still_served(
                f"folder {source.subdir!r} does not exist on branch {source.branch} "
                f"of {source.url} (commit {commit[:12]})"
            )
        )
    return rev_parse(upstream, name, env)
