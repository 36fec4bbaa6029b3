"""The benchmarks' data generators, one module per data set (seeded: one seed, one data set)."""
