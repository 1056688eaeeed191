"""What a run tells afterwards: the summary table it prints (``summary``), the run report, a
JSON document and an HTML page rebuilt from the state alone (``report``), and what ``pipelines
status`` says of the last run and a pending one (``status``)."""
