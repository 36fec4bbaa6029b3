from benchmarks.temporal_qa.run import main

raise SystemExit(main())
