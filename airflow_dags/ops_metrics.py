"""Airflow DAGs of conf/pipelines/ops_metrics.yaml: the scheduled one and the manual replay (pipelines.airflow_dag)."""

from pipelines.airflow_dag import dag_for, replay_dag_for

dag = dag_for("ops_metrics.yaml")
replay_dag = replay_dag_for("ops_metrics.yaml")
