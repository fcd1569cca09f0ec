"""What the JupyterHub process loads: course profiles at spawn, spawners, GPUs, devices.

Loaded by ``jupyterhub`` (through the rendered ``jupyterhub_config.py``) and,
for :mod:`coursehub.spawn.busyactivity`, by each single-user server; never by
the course app or the command line. Imports only :mod:`coursehub.resources`,
:mod:`coursehub.contract` and :mod:`coursehub.errors` (checked by
``tests/test_import_arrows.py``).

* :mod:`.spawner` - :class:`~coursehub.spawn.spawner.CourseProfiles`, the
  spawner hooks (profile choice, GPU assignment);
* :mod:`.profiles` - pure rules: choices, spawn form, traits per spawner kind;
* :mod:`.cgroupspawner` - local process spawners with per-server cgroups
  (:mod:`.cgrouprecord`: a server's cgroup name and its record in the state);
* :mod:`.lti` - LTI 1.3 sign-in from the LMS (:mod:`.ltiregistration`: the
  platform registrations it accepts);
* :mod:`.devices` - which NVIDIA devices a server may open;
* :mod:`.identity` - this hub's id on the host;
* :mod:`.runtimedir` - each server's Jupyter runtime folder outside its home;
* :mod:`.busyactivity` - the busy-kernel jupyter_server extension;
* :mod:`.oomnotice` - the out-of-memory notice in the running cell (loaded with it).
"""
