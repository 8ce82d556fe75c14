"""``python -m dvengine.cli``: the same as the ``dvengine`` command."""

import sys

from dvengine.cli.main import main

sys.exit(main())
