"""Builds the optional C kernels of kafkalog.record; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalog.record._speedups",
            ["kafkalog/record/_speedups.c"],
            libraries=["z"],
            extra_compile_args=["-O2"],
            # Without a compiler the package still installs and runs on the pure-Python kernels.
            optional=True,
        )
    ]
)
