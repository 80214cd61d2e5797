"""``python -m geval_async``: the same as the ``geval-async`` command."""

import sys

from .cli import main

sys.exit(main())
