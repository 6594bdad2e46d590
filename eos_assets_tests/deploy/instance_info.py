"""What the Dagster instance of ``$DAGSTER_HOME`` loaded, as one JSON line.

``python -m eos_assets_tests.deploy.instance_info`` opens the instance the way the webserver,
the daemon and the CLI do (``DagsterInstance.get()``), so a PostgreSQL instance connects and
creates its schema, and prints the classes and limits it ended up with.
"""

import json

import dagster as dg


def main() -> None:
    """Print the instance's storage, run coordinator and concurrency settings."""
    with dg.DagsterInstance.get() as instance:
        concurrency = instance.get_concurrency_config()
        queue = concurrency.run_queue_config
        info = {
            "run_storage": type(instance.run_storage).__name__,
            "event_log_storage": type(instance.event_log_storage).__name__,
            "run_coordinator": type(instance.run_coordinator).__name__,
            "max_concurrent_runs": queue.max_concurrent_runs if queue else None,
            "pool_default_limit": concurrency.pool_config.default_pool_limit,
            "pool_granularity": str(concurrency.pool_config.pool_granularity),
            "run_monitoring": instance.run_monitoring_enabled,
            "run_retries": instance.run_retries_max_retries,
            "telemetry": instance.telemetry_enabled,
        }
    print(json.dumps(info))


if __name__ == "__main__":
    main()
