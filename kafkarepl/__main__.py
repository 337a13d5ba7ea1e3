"""`python -m kafkarepl ...` works like the `kafkarepl` command."""

import sys

from kafkarepl.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
