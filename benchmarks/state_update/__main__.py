import sys

from benchmarks.state_update.run import main

sys.exit(main())
