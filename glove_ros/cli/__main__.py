"""``python -m glove_ros.cli`` is ``glove-ros``."""

import sys

from glove_ros.cli.main import main

sys.exit(main())
