"""Airflow DAG of conf/pipelines/ops_metrics.yaml (load, transforms, validate, publish): see pipelines.airflow_dag."""

from pipelines.airflow_dag import dag_for

dag = dag_for("ops_metrics.yaml")
