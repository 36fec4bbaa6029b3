"""Build script: the native extension from csrc/ arrives with the kernels (see pyproject.toml)."""

from setuptools import setup

setup()
