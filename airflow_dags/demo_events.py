"""Airflow DAG of conf/pipelines/demo_events.yaml (load, transforms, validate, publish): see pipelines.airflow_dag."""

from pipelines.airflow_dag import dag_for

dag = dag_for("demo_events.yaml")
