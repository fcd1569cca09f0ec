"""``coursehub deploy``: the whole plan made first, printed, then carried out in order.

:func:`make_plan` reads what is on disk (below ``--root``) and decides every
change; :func:`render_plan` prints it; :func:`apply_plan` carries it out.
A second run over a finished install plans nothing ("nothing to change").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from coursehub.deploy import host
from coursehub.deploy.files import (
    SECRET_MODE,
    FileChange,
    FileSpec,
    apply_files,
    apply_folders,
    new_secrets,
    plan_files,
    plan_folders,
    read_env_file,
    render_env_file,
)
from coursehub.deploy.hubconf import TlsFiles, render_deploy_hub_config, render_web_env
from coursehub.deploy.layout import DeployLayout
from coursehub.deploy.units import UnitSettings, render_tmpfiles, render_units
from coursehub.errors import UsageError


@dataclass(frozen=True)
class DeployOptions:
    """The command line of ``coursehub deploy`` (see :mod:`coursehub.deploy.cli`)."""

    layout: DeployLayout
    python: str
    proxy: str
    database: str = "sqlite"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    hostname: str = "localhost"
    port: int = 443


@dataclass
class DeployPlan:
    """Every change of one run; all empty: the host is installed as asked."""

    folders: list[tuple[PurePosixPath, int]] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)
    trial_pair: TlsFiles | None = None
    postgres: list[str] = field(default_factory=list)
    migrate_from: str | None = None
    database_url: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> int:
        """How many changes the plan makes."""
        steps = [self.trial_pair, self.postgres, self.migrate_from is not None]
        return len(self.folders) + len(self.files) + sum(1 for s in steps if s)


def _secrets(layout: DeployLayout, postgres: bool) -> dict[str, str]:
    """Return the install's secrets: those on disk kept, the missing ones new."""
    fresh = new_secrets()
    cookie = layout.on_disk(layout.cookie_secret)
    stored = read_env_file(layout.on_disk(layout.secrets_env))
    values = {
        "cookie_secret": cookie.read_text().strip() if cookie.exists() else fresh["cookie_secret"],
        "COURSEHUB_SERVICE_TOKEN": stored.get("COURSEHUB_SERVICE_TOKEN", fresh["service_token"]),
    }
    if postgres:
        values["COURSEHUB_DB_PASSWORD"] = stored.get(
            "COURSEHUB_DB_PASSWORD", new_secrets()["service_token"]
        )
    return values


def _tls(options: DeployOptions) -> tuple[TlsFiles, list[FileSpec]]:
    layout = options.layout
    if options.tls_cert is None or options.tls_key is None:
        if options.tls_cert or options.tls_key:
            raise UsageError("give both --tls-cert and --tls-key, or neither (a trial pair)")
        cert, key = (
            layout.tls_dir / "trial-self-signed-cert.pem",
            layout.tls_dir / "trial-self-signed-key.pem",
        )
        return TlsFiles(str(cert), str(key), trial=True), []
    try:
        cert_text, key_text = options.tls_cert.read_text(), options.tls_key.read_text()
    except OSError as exc:
        raise UsageError(
            f"--tls-cert/--tls-key: cannot read {exc.filename}: {exc.strerror}"
        ) from exc
    cert, key = layout.tls_dir / "cert.pem", layout.tls_dir / "key.pem"
    specs = [FileSpec(cert, cert_text, 0o644), FileSpec(key, key_text, SECRET_MODE)]
    return TlsFiles(str(cert), str(key), trial=False), specs


def _database_urls(options: DeployOptions, secrets: dict[str, str]) -> tuple[str, str]:
    """Return the catalog's URL as written in the config (no password) and as used here."""
    layout = options.layout
    if options.database == "postgresql":
        shown = f"postgresql+psycopg://{host.PG_NAME}@localhost/{host.PG_NAME}"
        used = shown.replace("@", f":{secrets['COURSEHUB_DB_PASSWORD']}@", 1)
        return shown, used
    return f"sqlite:///{layout.sqlite_path}", f"sqlite:///{layout.on_disk(layout.sqlite_path)}"


def _settings_env(layout: DeployLayout, database_shown: str, postgres: bool) -> dict[str, str]:
    values = {
        "COURSEHUB_DATA_DIR": str(layout.var),
        "COURSEHUB_SHARED_ROOT": str(layout.shared),
        "COURSEHUB_USAGE_DIR": str(layout.usage_dir),
    }
    if not postgres:
        values["COURSEHUB_DATABASE_URL"] = database_shown
    return values


def file_specs(options: DeployOptions, secrets: dict[str, str]) -> tuple[list[FileSpec], TlsFiles]:
    """Return every file the install writes (host paths, contents, modes) and its TLS files."""
    layout, postgres = options.layout, options.database == "postgresql"
    tls, tls_specs = _tls(options)
    shown, used = _database_urls(options, secrets)
    secret_env = {"COURSEHUB_SERVICE_TOKEN": secrets["COURSEHUB_SERVICE_TOKEN"]}
    if postgres:
        secret_env["COURSEHUB_DB_PASSWORD"] = secrets["COURSEHUB_DB_PASSWORD"]
        secret_env["COURSEHUB_DATABASE_URL"] = used
    header = "Generated by `coursehub deploy`."
    specs = [
        FileSpec(layout.cookie_secret, secrets["cookie_secret"] + "\n", SECRET_MODE, keep=True),
        FileSpec(
            layout.secrets_env, render_env_file(secret_env, header + " Secrets."), SECRET_MODE
        ),
        FileSpec(
            layout.settings_env, render_env_file(_settings_env(layout, shown, postgres), header)
        ),
        FileSpec(
            layout.web_env,
            render_env_file(render_web_env(secrets["COURSEHUB_SERVICE_TOKEN"]), header),
            SECRET_MODE,
        ),
        FileSpec(
            layout.hub_config,
            render_deploy_hub_config(layout, shown, options.proxy, tls, options.port),
            SECRET_MODE,
        ),
        *tls_specs,
    ]
    units = render_units(layout, UnitSettings(python=options.python, proxy=options.proxy))
    specs += [FileSpec(layout.units / name, text) for name, text in units.items()]
    specs.append(FileSpec(layout.tmpfiles, render_tmpfiles(layout)))
    return specs, tls


def make_plan(options: DeployOptions) -> DeployPlan:
    """Return what this run changes, from what is below ``options.layout.root`` (writes nothing).

    Raises
    ------
    UsageError
        If the TLS options are half given or unreadable.
    DeployError
        With ``--database postgresql``, if ``psql`` cannot run as ``postgres``.
    """
    layout, postgres = options.layout, options.database == "postgresql"
    secrets = _secrets(layout, postgres)
    specs, tls = file_specs(options, secrets)
    plan = DeployPlan(folders=plan_folders(layout), files=plan_files(layout, specs))
    if tls.trial and not layout.on_disk(PurePosixPath(tls.cert)).exists():
        plan.trial_pair = tls
    plan.database_url = _database_urls(options, secrets)[1]
    if postgres:
        plan.postgres = host.postgres_missing()
    new_catalog = plan.postgres if postgres else not layout.on_disk(layout.sqlite_path).exists()
    if new_catalog:
        plan.migrate_from = "(empty)"
    else:
        current, head = host.pending_migration(plan.database_url)
        if current != head:
            plan.migrate_from = current or "(empty)"
    if options.python.startswith("/root/") or "/home/" in options.python:
        plan.notes.append(f"{options.python} is under a home: the servers' accounts may not run it")
    return plan


def render_plan(plan: DeployPlan, root: Path = Path("/")) -> str:
    """Return the plan as lines for a person (pure), or "nothing to change".

    Below another ``root`` (``--root DIR``) each line names the path written,
    inside ``root``; a first line says so, and that the files name the paths
    as the installed host will see them (without ``root``).
    """
    layout = DeployLayout(root=root)
    lines = [f"make folder {layout.on_disk(f)} ({mode:04o})" for f, mode in plan.folders]
    for change in plan.files:
        why = f" ({change.why})" if change.why else ""
        path = layout.on_disk(change.spec.path)
        lines.append(f"{change.action} {path} ({change.spec.mode:04o}){why}")
    if plan.trial_pair:
        cert = layout.on_disk(PurePosixPath(plan.trial_pair.cert))
        lines.append(f"make a self-signed TLS pair FOR A TRIAL ONLY (browsers warn): {cert}")
    if plan.postgres:
        lines.append(f"PostgreSQL: create the {host.PG_NAME} {' and '.join(plan.postgres)}")
    if plan.migrate_from is not None:
        lines.append(f"migrate the catalog from revision {plan.migrate_from} to the newest")
    lines += [f"note: {note}" for note in plan.notes]
    if root != Path("/"):
        lines.insert(
            0,
            f"paths below {root}, where this run writes; the files written name them as the "
            f"installed host sees them, without {root} (/etc/coursehub, /var/lib/coursehub)",
        )
    return "\n".join(lines) if plan.changes else "\n".join(["nothing to change", *lines])


def apply_plan(options: DeployOptions, plan: DeployPlan, hostname: str) -> None:
    """Carry out ``plan``: folders, files, the trial pair, PostgreSQL, the migration.

    Raises
    ------
    DeployError
        If ``openssl``, ``psql``, ``createuser`` or ``createdb`` fails.
    """
    layout = options.layout
    apply_folders(layout, plan.folders)
    apply_files(layout, plan.files)
    if plan.trial_pair:
        host.make_trial_pair(
            layout.on_disk(PurePosixPath(plan.trial_pair.cert)),
            layout.on_disk(PurePosixPath(plan.trial_pair.key)),
            hostname,
        )
    if options.database == "postgresql":
        password = read_env_file(layout.on_disk(layout.secrets_env))["COURSEHUB_DB_PASSWORD"]
        host.ensure_postgres(password)
    if plan.migrate_from is not None:
        host.migrate(plan.database_url)
