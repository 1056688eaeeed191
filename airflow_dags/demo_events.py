"""Airflow DAGs of conf/pipelines/demo_events.yaml: the scheduled one and the manual replay (pipelines.airflow_dag)."""

from pipelines.airflow_dag import dag_for, replay_dag_for

dag = dag_for("demo_events.yaml")
replay_dag = replay_dag_for("demo_events.yaml")
