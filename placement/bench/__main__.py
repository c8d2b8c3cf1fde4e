import sys

from placement.bench.cli import main

sys.exit(main())
