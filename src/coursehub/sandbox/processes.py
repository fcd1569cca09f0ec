"""Every process coursehub starts: the account it runs as, what it reaches, its sandbox plan.

:data:`PROCESSES` is the one list; ``docs/security.md`` prints it
(:func:`render_process_table`), and ``tests/test_security_table.py`` checks
that the page shows exactly this table, that every ``entry`` names code
that exists, and that every module that builds a sandbox plan
(:func:`coursehub.sandbox.command.plan_sandbox_command`) is the ``plan`` of a row,
so that a new path that runs someone else's code cannot be left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessRow:
    """One process coursehub starts.

    ``entry``: ``module:name`` of the code that starts it (or renders its
    configuration); ``plan``: ``module:name`` of the code that puts it in
    the sandbox (:mod:`coursehub.sandbox`), or "" for trusted code.
    """

    process: str
    entry: str
    account: str
    reads: str
    writes: str
    network: str
    plan: str = ""


#: The processes, in the order of a request's path through the system.
PROCESSES: tuple[ProcessRow, ...] = (
    ProcessRow(
        "JupyterHub",
        "coursehub.hub.render:render_hub_config",
        "the hub's account (root on a department host, for the spawners)",
        "hub database, its configuration, the course profiles",
        "hub database, servers' cgroups and units",
        "yes",
    ),
    ProcessRow(
        "configurable-http-proxy",
        "coursehub.hub.render:render_hub_config",
        "the hub's account",
        "its routes (from the hub)",
        "nothing",
        "yes (the public port)",
    ),
    ProcessRow(
        "course app (hub service)",
        "coursehub.hub.render:render_hub_config",
        "the hub's account (a hub-managed service)",
        "catalog, material mirrors and credentials, books, course directories",
        "catalog, course directories, mirrors",
        "yes (the hub API, allow-listed material hosts)",
    ),
    ProcessRow(
        "formgrader (one per course, hub service)",
        "coursehub.grading.formgrader.service:render_formgrader_config",
        "as root: its course's own account `fg-<hub_id>-<course_id>` (no capabilities, the "
        "course's group); else the hub's account. Serves nbgrader's formgrader pages only (no "
        "kernel, terminal or contents API: coursehub.grading.formgrader.guard)",
        "its course directory (its nbgrader_config.py read-only), the exchange as its modes "
        "allow; the installation, read-only",
        "its course's gradebook, autograded/ and feedback/",
        "yes (the hub API)",
        "coursehub.grading.formgrader.service:formgrader_service_command",
    ),
    ProcessRow(
        'formgrader\'s autograde kernel (its "autograde" button)',
        "coursehub.grading.sandbox.kernel:SandboxKernelManager",
        "the formgrader's uid in a user namespace (refused where the host has none)",
        "a private copy of the one submission; the installation, read-only",
        "that private copy",
        "no (own network namespace)",
        "coursehub.grading.sandbox.kernel:SandboxKernelManager",
    ),
    ProcessRow(
        "idle culler (hub service)",
        "coursehub.hub.render:render_hub_config",
        "the hub's account",
        "the hub API (its token's scopes)",
        "nothing",
        "loopback (the hub API)",
    ),
    ProcessRow(
        "student's server (single-user Jupyter)",
        "coursehub.spawn.spawner:CourseProfiles",
        "the student's own account (SystemdSpawner, cgroup spawners as root); the demo's own",
        "the student's home, the course data folders (read)",
        "the student's home",
        "yes",
    ),
    ProcessRow(
        "student's exam server (during their running exam)",
        "coursehub.spawn.examserver:ExamServers",
        "the student's own account; no terminal; server extensions: JupyterLab, the clock only",
        "the exam home (its root folder); the installation",
        "the exam home",
        "yes (the proxy reaches it; SystemdSpawner: IPAddressAllow= the hub only)",
    ),
    ProcessRow(
        "exam kernel",
        "coursehub.examroom.kernelmanager:ExamKernelManager",
        "the student's uid in a user namespace, no capabilities (refused where the host has "
        "none); shell escapes refused by coursehub.examroom.guard",
        "what the student's account reads (the course homes' root hidden when configured)",
        "the exam home; its own /tmp, /var/tmp and /dev/shm (nothing another student's kernel "
        "wrote there)",
        "no (own network namespace; ZMQ over Unix sockets)",
        "coursehub.examroom.kernelmanager:plan_exam_kernel_command",
    ),
    ProcessRow(
        "exam autosave (`coursehub exam snapshot`, a timer)",
        "coursehub.grading.examsnapshot:snapshot_exam",
        "root",
        "every exam home of the exam (links, devices and pipes skipped)",
        "the snapshot store (root, 0700)",
        "no",
    ),
    ProcessRow(
        "runner job (`coursehub run`)",
        "coursehub.runner.local:LocalBackend",
        "whoever runs it (the student, in their server)",
        "what that account reads",
        "what that account writes; its run log",
        "yes",
    ),
    ProcessRow(
        "Slurm job (runner on Slurm, SlurmSpawner server)",
        "coursehub.runner.slurm.backend:SlurmBackend",
        "the submitting account, on the Slurm node",
        "what that account reads on the node",
        "what that account writes on the node",
        "as the cluster allows",
    ),
    ProcessRow(
        "autograde job (nbgrader, trusted)",
        "coursehub.grading.autograde.job:grading_spec",
        "the course app's account (root on a hub host)",
        "the course directory",
        "the gradebook, autograded/ and feedback/ of the course",
        "no need (allow-listed environment, no token)",
    ),
    ProcessRow(
        "autograde array task (one per share of a batch on Slurm; nbgrader, trusted)",
        "coursehub.grading.autograde.arraybatch:array_spec",
        "the course app's account (root on a hub host), on the Slurm node",
        "the course directory; the batch's copy of the gradebook",
        "its own gradebook, outcomes and logs in the batch's folder; autograded/ of its "
        "share (the submitting side merges its gradebook into the course's)",
        "no need (allow-listed environment, --export=NONE, no token)",
    ),
    ProcessRow(
        "autograde kernel (the student's cells)",
        "coursehub.grading.sandbox.kernel:SandboxKernelManager",
        "the sandbox account (`coursehub-grader`) as root; same uid in a user namespace otherwise",
        "a private copy of the one submission; the installation, read-only",
        "that private copy",
        "no (own network namespace)",
        "coursehub.grading.sandbox.kernel:SandboxKernelManager",
    ),
    ProcessRow(
        "kernel fork server (one per grading worker and per formgrader; forks each "
        "submission's kernel)",
        "coursehub.grading.sandbox.forkclient:fork_server",
        "the sandbox account (`coursehub-grader`) as root; same uid in a user namespace "
        "otherwise; non-dumpable, never runs a student's code",
        "the installation, read-only; the forked kernels' private copies",
        "its private /tmp, /var/tmp and /dev/shm (emptied after each kernel, with every "
        "leftover process killed)",
        "no (own network namespace)",
        "coursehub.grading.sandbox.forkclient:ForkServer",
    ),
    ProcessRow(
        "course book build (Jupyter Book, a runner job)",
        "coursehub.books.build:build_book",
        "the sandbox account as root; the caller in a user namespace otherwise",
        "a private copy of the book (allow-listed configuration keys); the installation, read-only",
        "that private copy; the HTML is copied back without following links",
        "no (own network namespace)",
        "coursehub.books.sandboxjob:run_build_job",
    ),
    ProcessRow(
        "course environment build (venv, pip install)",
        "coursehub.courseenv.build:build_environment",
        "the sandbox account as root (it owns only the new build folder); the caller otherwise",
        "the course's requirements, the site's package index",
        "the new build folder, then sealed root's and read-only",
        "only when the package index is remote",
        "coursehub.courseenv.sandboxjob:_run_step",
    ),
    ProcessRow(
        "material update (git fetch)",
        "coursehub.material.mirror:update_mirror",
        "the course app's account",
        "the course's credential, its mirrors",
        "the course's private and published mirrors",
        "yes, to the course's repository host only",
    ),
    ProcessRow(
        "usage ingest (the hub's usage-ingest service, local spawners; or by hand)",
        "coursehub.catalog.usage.ingest:ingest_folder",
        "the hub's account as a hub service, else the course app's (root for the hub's records)",
        "the hub's usage folder and the jobs' folder (files checked by owner)",
        "catalog (usage tables)",
        "no need",
    ),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_process_table(rows: tuple[ProcessRow, ...] = PROCESSES) -> str:
    """Return :data:`PROCESSES` as the Markdown table of ``docs/security.md`` (pure)."""
    header = (
        "| process | started by | account | reads | writes | network | sandbox plan |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n"
    )
    lines = [
        "| "
        + " | ".join(
            _cell(value)
            for value in (
                row.process,
                f"`{row.entry}`",
                row.account,
                row.reads,
                row.writes,
                row.network,
                f"`{row.plan}`" if row.plan else "none (trusted code)",
            )
        )
        + " |"
        for row in rows
    ]
    return header + "\n".join(lines) + "\n"
