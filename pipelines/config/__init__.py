"""The pipeline file: its typed, frozen model (``pipeline``, ``steps``), the strict loader that
reads and checks it once (``loader``), and the reference generated from the model (``reference``)."""
