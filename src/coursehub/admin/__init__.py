"""Running a department's year: course copies and rollovers with their nbgrader sources,
and the ``coursehub year|portal|course`` commands.

The catalog side (years, portals, managers, the copy of a course's rows) is
:mod:`coursehub.catalog.admin` and :mod:`coursehub.catalog.rollover`; this
package adds what needs the grading layout, which the catalog may not import
(docs/architecture.md): the copy of each course's assignment sources.
"""
