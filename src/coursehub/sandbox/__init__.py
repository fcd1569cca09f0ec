"""The one sandbox for every job that runs code someone else wrote.

A student's submission (autograde), a teacher's or a repository's notebooks
and configuration (course books), a package named in a course's
requirements (course environments): each runs through one
:class:`~coursehub.sandbox.command.SandboxPlan`, which says

- the **account**: the unprivileged sandbox account
  (:mod:`coursehub.sandbox.account`, ``coursehub-grader`` by default) when
  coursehub runs as root, else the caller's own uid inside a user namespace;
- the **environment**: an allow-list (:mod:`coursehub.sandbox.env`): no hub
  token, catalog URL, secret key or other credential;
- the **hidden paths**: folders covered by an empty, unreadable tmpfs in the
  job's own mount namespace (other courses, the exchange, the catalog);
- the **exposed paths**: the installation the job needs (its interpreter),
  shown read-only even where it lies under a folder the account cannot enter
  (a virtualenv under ``/root``);
- the **network**: none (a new network namespace with a down loopback) unless
  the plan allows it (a course environment's ``pip install``);
- the **limits**: no new privileges, no capabilities, a task limit.

:mod:`coursehub.sandbox.preflight` checks before a batch that the plan can
work on this host and names what to change when it cannot. The table of
processes and their plans is in ``docs/security.md``.
"""
