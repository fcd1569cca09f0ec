"""The teaching team in its students' servers: JupyterHub shares granted from the catalog.

:mod:`coursehub.teamaccess.shares` shares each student's server with the
course's team group (``formgrade-{course_id}``) and with each of its members
(the shares a server's OAuth token honours, JupyterHub 6.1) through the hub's
shares API (JupyterHub >= 5), at run time; :mod:`coursehub.teamaccess.servers` lists the
students' servers for the team's page. See docs/course-data.md.
"""
