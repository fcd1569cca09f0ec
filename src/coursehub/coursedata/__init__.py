"""Shared course data folders: the team writes, the course's students read, others see nothing.

``coursehub data ensure [COURSE_ID]`` (:mod:`coursehub.coursedata.cli`) makes or
refreshes, from the catalog's roster, two Unix groups per course and the
folder ``<shared root>/courses/<course_id>/data`` with POSIX ACLs
(:mod:`coursehub.coursedata.folders`); the hub process shows it in each server
of the course (:mod:`coursehub.spawn.coursespaces`). See docs/course-data.md.
"""
