import sys

from benchmarks.locomo.run import main

sys.exit(main())
