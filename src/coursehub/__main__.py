"""``python -m coursehub`` is the ``coursehub`` command."""

from coursehub.cli import main

raise SystemExit(main())
