"""Airflow DAGs of conf/pipelines/demo_events.yaml: the scheduled one and the manual replay (pipelines.app.airflow)."""

from pipelines.app.airflow import dag_for, replay_dag_for

dag = dag_for("demo_events.yaml")
replay_dag = replay_dag_for("demo_events.yaml")
