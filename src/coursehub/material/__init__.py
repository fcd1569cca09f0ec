"""A course's material from git: a mirror per course on the course app's host, pulled by students.

- :mod:`~coursehub.material.layout`: where the mirrors, credentials and locks live;
- :mod:`~coursehub.material.credential`: a private repository's token or deploy key,
  a private file of the host, handed to git by ``GIT_ASKPASS`` or ``GIT_SSH_COMMAND``;
- :mod:`~coursehub.material.hosts`: the hosts a repository may be fetched from
  (``COURSEHUB_MATERIAL_HOSTS``; public addresses only by default);
- :mod:`~coursehub.material.gitcmd`: git in a subprocess with an allow-listed environment,
  its failures explained in one line;
- :mod:`~coursehub.material.mirror`: fetch, check, publish the course's folder as an
  append-only history that students pull read-only (``file://``) with nbgitpuller;
- :mod:`~coursehub.material.service`: the catalog side (set, update, show);
- :mod:`~coursehub.material.cli`: ``coursehub material ...``.

See docs/material.md.
"""
