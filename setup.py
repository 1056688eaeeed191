"""Builds the optional C kernels of kafkalog.record, kafkalog.protocol and kafkalog.schemas; everything else
is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalog.record._speedups",
            [  # the module, then one file per job (_speedups.h lists them)
                "kafkalog/record/_speedups.c",
                "kafkalog/record/_speedups_message.c",
                "kafkalog/record/_speedups_crc32c.c",
                "kafkalog/record/_speedups_scan.c",
                "kafkalog/record/_speedups_legacy.c",
                "kafkalog/record/_speedups_batch.c",
                "kafkalog/record/_speedups_compact.c",
            ],
            depends=["kafkalog/record/_speedups.h"],
            libraries=["z"],
            # the files share functions among themselves, not with the process: only PyInit is exported
            extra_compile_args=["-O2", "-fvisibility=hidden"],
            # Without a compiler the package still installs and runs on the pure-Python kernels.
            optional=True,
        ),
        Extension(
            "kafkalog.protocol._wire",
            ["kafkalog/protocol/_wire.c"],
            extra_compile_args=["-O2"],
            optional=True,  # without it the protocol's reference codec runs alone
        ),
        Extension(
            "kafkalog.schemas._avro_columns",
            ["kafkalog/schemas/_avro_columns.c"],
            extra_compile_args=["-O2"],
            optional=True,  # without it the pure-Python twin (_avro_columns_py) decodes
        ),
        Extension(
            "kafkalog.schemas._protobuf_columns",
            ["kafkalog/schemas/_protobuf_columns.c"],
            extra_compile_args=["-O2"],
            optional=True,  # without it the pure-Python twin (_protobuf_columns_py) decodes
        ),
    ]
)
