"""``python -m dsh`` runs the ``dsh`` command."""

import sys

from .cli import main

sys.exit(main())
