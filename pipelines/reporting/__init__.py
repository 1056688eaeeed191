"""What a run tells afterwards: the summary table it prints (``summary``) and the run report, a
JSON document and an HTML page rebuilt from the state alone (``report``)."""
