"""``python -m dsh`` runs the ``dsh`` command."""

import sys

from ._startup import main

sys.exit(main())
