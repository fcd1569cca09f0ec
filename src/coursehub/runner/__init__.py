"""Run a script in a fresh interpreter with explicit resources (threads, memory, GPUs, time).

Python API (:mod:`coursehub.runner.api`)::

    from coursehub.runner.api import run, submit
    result = run("train.py", ["model.pt", "100"], n_threads=2, mem_limit="4G", timeout_s="30m")
    job = submit("coursehub.pendulum.train", ["lstm", "5", "2"], module=True, n_threads=2)
    print(job.state, job.wait().elapsed_s)

Command line: ``coursehub run --threads 2 --mem 4G -- train.py model.pt 100``.
IPython: ``%load_ext coursehub.runner.magic`` then ``%coursehub_run --threads 2 train.py ...``.
The modules and what each holds: docs/architecture.md.
"""
