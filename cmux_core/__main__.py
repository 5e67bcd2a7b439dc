from __future__ import annotations

import sys

from cmux_core.cli.main import main

sys.exit(main())
