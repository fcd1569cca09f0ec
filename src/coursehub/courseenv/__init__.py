"""Course environments: a course's Python, built once on the host, seen only by its servers.

``coursehub env set COURSE_ID`` declares the course's requirements
(:mod:`coursehub.courseenv.requirements`), ``coursehub env build COURSE_ID``
builds them aside and switches atomically (:mod:`coursehub.courseenv.build`),
``coursehub env show COURSE_ID`` prints the state; the course page shows it too.
"""
