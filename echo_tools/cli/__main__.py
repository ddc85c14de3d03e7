"""`python -m echo_tools.cli`: the same command as `echo-tools`."""

import sys

from echo_tools.cli.main import main

sys.exit(main())
