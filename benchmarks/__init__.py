"""rotmem's benchmarks: each module runs as ``python -m benchmarks.<name>`` from the checkout's root.

A package, so that no benchmark's file name (``kernels``, ``harness``, ``scale``: names that PyPI
packages also use) is ever a top-level module: nothing puts ``benchmarks/`` on ``sys.path``.
"""
