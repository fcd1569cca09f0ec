"""Course books: a Jupyter Book built from each course's material, served by the course app.

- :mod:`~coursehub.books.settings`: where a course's books live, its settings file
  (book folder, source folder, notebook execution, public) and its state file;
- :mod:`~coursehub.books.bookconfig`: the book's ``_config.yml`` as built (allow-listed
  keys, the course's execution);
- :mod:`~coursehub.books.plan`: pure checks and plans (table of contents, links out of
  the book, build ids, state shown to users);
- :mod:`~coursehub.books.source`: the book's source copied from the material or a folder,
  and checked;
- :mod:`~coursehub.books.build`: one build, built aside and switched in atomically (the
  last good book stays served when a build fails);
- :mod:`~coursehub.books.sandboxjob`: ``jupyter-book build`` started in the sandbox as a
  runner job;
- :mod:`~coursehub.books.background`: a build started as a detached process (the course
  app, the demo);
- :mod:`~coursehub.books.job`: the runner job itself (``jupyter-book build``);
- :mod:`~coursehub.books.cli`: ``coursehub book build|show|settings``.

See docs/books.md.
"""
