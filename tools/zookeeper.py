"""Start/stop a local ZooKeeper (Debian's package): `python -m tools.zookeeper start|stop|status`.

The implementation lives in kafkarepl.zk.local so that `kafkarepl cluster up` can use it
from an installed package; this module keeps the tools/ entry point.
"""

import sys

from kafkarepl.zk.local import *  # noqa: F403 - re-export for scripts and tests
from kafkarepl.zk.local import main

if __name__ == "__main__":
    sys.exit(main())
