import sys

from deltamup.cli import main

sys.exit(main())
