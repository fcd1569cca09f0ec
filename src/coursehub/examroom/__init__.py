"""The exam workspace: exam homes, exam servers' traits, exam kernels without network.

- :mod:`coursehub.examroom.home`: one fresh home per exam and student, the
  exam's notebooks fetched into it;
- :mod:`coursehub.examroom.server`: the spawner traits of an exam server
  (pure);
- :mod:`coursehub.examroom.kernelmanager`: kernels in their own network
  namespace, ZMQ over Unix sockets;
- :mod:`coursehub.examroom.guard`: the kernel's refusals of shell escapes
  and of imports outside the exam's list (the message layer);
- :mod:`coursehub.examroom.clock`: the exam clock's server extension (the
  sitting, asked of the course app; the browser's events forwarded to it),
  and ``labextensions/``, the clock's built JupyterLab extension.

Loaded by the hub (home, server) and by the student's exam server
(kernelmanager, guard, clock): standard library, the sandbox's command,
jupyter_client, and tornado and jupyter_server in the clock.
"""
