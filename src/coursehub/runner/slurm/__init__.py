"""The runner's Slurm backend; its modules and what each holds: docs/architecture.md.

``backend`` submits and follows a job, ``plan`` renders the batch script and
reads Slurm's answers (pure), ``commands`` runs sbatch, scontrol, scancel,
sstat and sacct, ``allocation`` is the batch job's first process.
"""
