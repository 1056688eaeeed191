"""Airflow DAG of conf/pipelines/page_views.yaml (load, transforms, validate, publish): see pipelines.airflow_dag."""

from pipelines.airflow_dag import dag_for

dag = dag_for("page_views.yaml")
