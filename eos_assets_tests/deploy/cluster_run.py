"""The whole asset graph on the Spark master of the settings, in a process of its own.

``python -m eos_assets_tests.deploy.cluster_run REPORT`` materializes every asset from bronze to
the DuckDB serving tables with the product's resources, configured by ``EOS_*`` variables only
(as in production), and then,
while its SparkContext is still up, asks the driver's status API where the tasks ran. It writes
a JSON report to REPORT: the run's outcome, the executors, the tasks of the bronze ingest's
Spark job per executor, the Python interpreters the executors run and the application's Spark
settings.
"""

import json
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark import SparkContext
from pyspark.sql import SparkSession

from eos_assets.resources import build_resources
from eos_assets.settings import Settings
from eos_assets_tests.support import graph

INGEST = "eos ingest"  # prefix of the description the bronze ingest gives its Spark job


def main(argv: list[str] | None = None) -> int:
    """Run the graph, write the report; exit 0 when the run succeeded."""
    report_path = Path((argv or sys.argv[1:])[0])
    resources = build_resources(Settings.from_env())
    result = dg.materialize(
        graph.ALL,
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    report: dict[str, Any] = {"success": result.success, "run_id": result.run_id}
    failure = next((e for e in result.all_events if e.is_failure), None)
    report["failure"] = failure.message if failure is not None else None
    if result.success:
        # The run's session is still up: getOrCreate returns it.
        report.update(_where_tasks_ran(SparkSession.builder.getOrCreate().sparkContext))
    report_path.write_text(json.dumps(report, indent=2))
    return 0 if result.success else 1


def _interpreter(_: int) -> str:
    return sys.executable


def _where_tasks_ran(sc: SparkContext) -> dict[str, Any]:
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    executors = [e for e in _get(f"{api}/allexecutors") if e["id"] != "driver"]
    # The description stays set on the thread after the ingest, so later jobs carry it too:
    # the ingest's own job is the first one with it.
    described = [j for j in _get(f"{api}/jobs") if j.get("description", "").startswith(INGEST)]
    ingest_jobs = sorted(described, key=lambda j: j["jobId"])[:1]
    ingest_tasks: Counter[str] = Counter()
    for job in ingest_jobs:
        for stage in job["stageIds"]:
            for attempt in _get(f"{api}/stages/{stage}"):
                tasks = _get(f"{api}/stages/{stage}/{attempt['attemptId']}/taskList?length=100000")
                ingest_tasks.update(t["executorId"] for t in tasks if t["status"] == "SUCCESS")
    # Last: these tasks must not count as the graph's.
    pythons = sorted(set(sc.parallelize(range(8), 8).map(_interpreter).collect()))
    return {
        "master": sc.master,
        "app_id": sc.applicationId,
        "executors": {
            e["id"]: {"hostPort": e["hostPort"], "totalTasks": e["totalTasks"]} for e in executors
        },
        "ingest_jobs": [f"{j['jobId']} {j['name']}: {j['description']}" for j in ingest_jobs],
        "ingest_tasks": dict(ingest_tasks),
        "pythons": pythons,
        "settings": dict(sc.getConf().getAll()),
    }


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


if __name__ == "__main__":
    sys.exit(main())
