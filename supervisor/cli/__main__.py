"""``python -m supervisor.cli``: the ``fleet-supervisor`` command."""

from __future__ import annotations

import sys

from supervisor.cli.main import main

__all__: list[str] = []

sys.exit(main())
