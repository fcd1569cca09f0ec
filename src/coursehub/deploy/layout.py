"""Where ``coursehub deploy`` puts each file, below an alternative file system root.

The places are Debian's (Filesystem Hierarchy Standard 3.0, ``hier(7)``):
configuration and secrets in ``/etc/coursehub``, state in ``/var/lib/coursehub``,
unit files an administrator installs in ``/etc/systemd/system``
(``systemd.unit(5)``, "Unit File Load Path"), the course spaces in ``/srv/coursehub``.
With ``--root DIR`` every path is below ``DIR`` (a non-booted install, as
``systemctl --root`` and ``debootstrap`` treat one); the files written there
still name the paths as the host will see them (:attr:`DeployLayout.host`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class DeployLayout:
    """The install's paths as the host sees them; :meth:`on_disk` maps one below ``root``.

    Attributes
    ----------
    root
        The file system root written to ("/" on the host itself).
    """

    root: Path = Path("/")

    etc = PurePosixPath("/etc/coursehub")
    var = PurePosixPath("/var/lib/coursehub")
    units = PurePosixPath("/etc/systemd/system")
    shared = PurePosixPath("/srv/coursehub")

    @property
    def hub_dir(self) -> PurePosixPath:
        """The hub's state: its database and pid files (``HubSettings.data_dir``)."""
        return self.var / "hub"

    @property
    def usage_dir(self) -> PurePosixPath:
        """The usage records the systemd spawner's hub writes (coursehub.spawn.systemdserver)."""
        return PurePosixPath("/run/coursehub/usage")

    @property
    def backups_dir(self) -> PurePosixPath:
        """Where the backup timer writes its archives."""
        return self.var / "backups"

    @property
    def sqlite_path(self) -> PurePosixPath:
        """The catalog's SQLite file, when the catalog is not in PostgreSQL."""
        return self.var / "catalog.sqlite"

    @property
    def hub_config(self) -> PurePosixPath:
        """The rendered ``jupyterhub_config.py``."""
        return self.etc / "jupyterhub_config.py"

    @property
    def cookie_secret(self) -> PurePosixPath:
        """The hub's cookie secret (``JupyterHub.cookie_secret_file``), 0600."""
        return self.etc / "jupyterhub_cookie_secret"

    @property
    def secrets_env(self) -> PurePosixPath:
        """Secrets as ``KEY=value`` lines for ``EnvironmentFile=`` (systemd.exec(5)), 0600."""
        return self.etc / "secrets.env"

    @property
    def web_env(self) -> PurePosixPath:
        """The course app's hub variables, its token among them, for ``EnvironmentFile=``, 0600."""
        return self.etc / "web.env"

    @property
    def settings_env(self) -> PurePosixPath:
        """The ``COURSEHUB_*`` settings every unit reads, 0644."""
        return self.etc / "coursehub.env"

    @property
    def tmpfiles(self) -> PurePosixPath:
        """The tmpfiles.d(5) file that makes the usage folder in ``/run`` at each boot."""
        return PurePosixPath("/etc/tmpfiles.d/coursehub.conf")

    @property
    def tls_dir(self) -> PurePosixPath:
        """The certificate and key the hub serves HTTPS with."""
        return self.etc / "tls"

    def on_disk(self, path: PurePosixPath) -> Path:
        """Return ``path`` (a host path) below :attr:`root`."""
        return self.root / path.relative_to("/")

    def folders(self) -> dict[PurePosixPath, int]:
        """Return the folders the install makes, with their modes (host paths)."""
        return {
            self.etc: 0o755,
            self.tls_dir: 0o755,
            self.var: 0o755,
            self.hub_dir: 0o700,
            self.backups_dir: 0o700,
            self.shared: 0o755,
            self.units: 0o755,
            self.tmpfiles.parent: 0o755,
        }
