"""Per-student home quotas enforced by the file system (docs/homes.md).

* :mod:`.fs` - what the home file system offers (ext4/XFS user quotas, XFS
  project quotas, btrfs qgroups on a subvolume per home) and the commands
  that set a limit;
* :mod:`.reading` - a home's use and limit as btrfs, quota(1) and
  xfs_quota(8) report them;
* :mod:`.plan` - each student's limit from the catalog (course, portal,
  department default);
* :mod:`.cli` - ``coursehub home quota|apply|detect``.
"""
