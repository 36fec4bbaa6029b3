import sys

from benchmarks.temporal_qa.run import main

sys.exit(main())
