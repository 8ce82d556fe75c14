"""``python -m dvengine.bench``: the bench subcommand without the main CLI."""

import sys

from dvengine.bench.cli import main

sys.exit(main())
