"""Airflow DAGs of conf/pipelines/page_views.yaml: the scheduled one and the manual replay (pipelines.app.airflow)."""

from pipelines.app.airflow import dag_for, replay_dag_for

dag = dag_for("page_views.yaml")
replay_dag = replay_dag_for("page_views.yaml")
