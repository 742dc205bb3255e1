"""``python -m condensate`` runs the command line."""

import sys

from condensate.cli import main

sys.exit(main())
