"""A Unix account per student and team member, kept in step with the catalog.

``coursehub accounts sync [--dry-run]`` (:mod:`coursehub.accounts.cli`) reads
every course's roster (:func:`coursehub.coursedata.ensure.load_rosters`),
plans what is missing (:mod:`coursehub.accounts.plan`, pure) and applies it
with ``useradd`` and ``gpasswd`` (:mod:`coursehub.accounts.apply`): a locked
password, a private home (0700), the course groups ``cht-``/``chs-<course_id>``.
It never deletes an account or a home. See docs/deploy.md.
"""
