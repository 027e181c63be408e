"""`python -m fedanon` runs the same CLI as the `fedanon` console script."""

import sys

from fedanon.cli import main

sys.exit(main())
