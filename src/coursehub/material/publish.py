"""The course's published repository: what students pull (step 4 of :mod:`.mirror`), read back.

A new tree becomes a commit on top of the published head (an append-only
history, whatever the teacher does to theirs), pushed as a fast-forward;
who may read it is set at each update (:mod:`coursehub.material.access`).
"""

from __future__ import annotations

import subprocess

from coursehub.atomicfile import write_atomically
from coursehub.material.access import (
    MaterialAccessError,
    apply_published_access,
    describe_access,
    plan_published_access,
)
from coursehub.material.gitcmd import GitCommandError, plan_local_git_env, rev_parse, run_git
from coursehub.material.layout import MaterialLayout, render_gitconfig
from coursehub.material.mirrortypes import MaterialError, MirrorResult, MirrorSource, still_served

#: Branch of the published repository (:data:`coursehub.catalog.material.PUBLISHED_BRANCH`).
PUBLISHED_REF = "refs/heads/main"
LAST_GOOD_REF = "refs/coursehub/last-good"
PUBLISHED_COPY_REF = "refs/coursehub/published"


def publish_tree(
    layout: MaterialLayout, source: MirrorSource, commit: str, tree: str
) -> MirrorResult:
    """Publish ``tree`` (of the teacher's ``commit``) to the course's published repository.

    Made if missing; its readers set again (the course's Unix groups). When
    ``tree`` is the published head's, nothing is pushed (``changed`` False);
    else a commit of ``tree`` on top of the head is pushed (a fast-forward).
    Either way ``commit`` becomes the private mirror's last good commit.

    Raises
    ------
    MaterialError
        If the readers cannot be set (:mod:`coursehub.material.access`).
    GitCommandError
        If git fails.
    """
    upstream = layout.upstream(source.course_id)
    published = layout.published_repo(source.course_id)
    env = plan_local_git_env(layout.home)
    if not (published / "HEAD").exists():
        run_git(["init", "--bare", "--quiet", "--template=", "--shared=0644", str(published)], env)
        run_git(["symbolic-ref", "HEAD", PUBLISHED_REF], env, cwd=published)
        repositories = [p.resolve() for p in layout.published.glob("*.git")]
        write_atomically(layout.gitconfig, render_gitconfig(repositories), mode=0o644)
    access = plan_published_access(source.course_id)
    try:  # each update: the course's groups may have been made since the last one
        apply_published_access(published, access)
    except MaterialAccessError as exc:
        raise MaterialError(still_served(str(exc))) from None
    readers = describe_access(access)
    head = rev_parse(published, PUBLISHED_REF, env, missing_ok=True)
    if head:
        run_git(
            ["fetch", "--quiet", "--", str(published), f"+{PUBLISHED_REF}:{PUBLISHED_COPY_REF}"],
            env,
            cwd=upstream,
        )
        if rev_parse(upstream, f"{head}^{{tree}}", env) == tree:
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


def published_head(layout: MaterialLayout, course_id: str) -> str:
    """The commit students get now ("" before the first good update)."""
    published = layout.published_repo(course_id)
    if not (published / "HEAD").exists():
        return ""
    try:
        return rev_parse(published, PUBLISHED_REF, plan_local_git_env(layout.home), missing_ok=True)
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
    repo, env = layout.published_repo(course_id), plan_local_git_env(layout.home)
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
