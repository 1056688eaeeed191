"""Log levels for pipelines: one switch for the command line, spark-submit and Airflow.

Role: every module logs through ``logging.getLogger(__name__)`` (names under ``pipelines.``); this
module attaches the one handler (stderr, a timestamped line per record) and sets the level, from
``--log-level`` or else the ``PIPELINES_LOG_LEVEL`` environment variable (what an Airflow task or a
spark-submit environment sets), default WARNING. The progress bars and run summaries a person
reads on a terminal are printed by pipelines.progress, apart from the log.
"""

from __future__ import annotations

import logging
import os
import sys

from pipelines.errors import PipelineError

ENV_LEVEL = "PIPELINES_LOG_LEVEL"
DEFAULT_LEVEL = "WARNING"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_HANDLER_NAME = "pipelines-stderr"


def level_name(given: str | None = None) -> str:
    """The level to use: ``given``, else ``$PIPELINES_LOG_LEVEL``, else WARNING; an unknown name
    is an error that says which names exist and where the bad one came from."""
    source = "--log-level" if given else ENV_LEVEL
    name = (given or os.environ.get(ENV_LEVEL) or DEFAULT_LEVEL).strip().upper()
    if name not in LEVELS:
        raise PipelineError(f"{source}: log level {name!r} is not one of {', '.join(LEVELS)}")
    return name


def configure_logging(given: str | None = None) -> str:
    """Attach the stderr handler to the ``pipelines`` logger (once) and set its level; returns the
    level's name. Other libraries' loggers (py4j, Spark's) are left as they are."""
    name = level_name(given)
    logger = logging.getLogger("pipelines")
    if not any(h.get_name() == _HANDLER_NAME for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger.addHandler(handler)
        logger.propagate = False  # Airflow's and Spark's root handlers would print each line twice
    logger.setLevel(name)
    return name
