"""Airflow DAGs of conf/pipelines/ops_metrics.yaml: the scheduled one and the manual replay (pipelines.app.airflow)."""

from pipelines.app.airflow import dag_for, replay_dag_for

dag = dag_for("ops_metrics.yaml")
replay_dag = replay_dag_for("ops_metrics.yaml")
