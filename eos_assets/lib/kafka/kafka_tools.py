"""Apache Kafka's own command-line tools, run from the installed jars (``.jars/kafka``).

The same classes as Kafka's ``bin/`` scripts: ``kafka-consumer-groups``,
``kafka-consumer-perf-test``, ``kafka-producer-perf-test``, ``kafka-delete-records``.
"""

import subprocess
from collections.abc import Sequence

from eos_assets.lib.errors import BrokerError
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import require_java

CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"


def run_tool(main_class: str, args: Sequence[str], timeout_s: float = 300.0) -> str:
    """Run one of Kafka's tools and return what it printed on standard output.

    Raises:
        BrokerError: the tool exited with an error (its last line of output says why).
    """
    command = [require_java("Kafka's tools"), "-Xmx512m", "-cp", jars.classpath("kafka")]
    command += [main_class, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()
        raise BrokerError(f"{main_class.rsplit('.', 1)[-1]} failed: {lines[-1]}")
    return done.stdout


def group_lag(bootstrap: str, group: str) -> dict[tuple[str, int], int | None]:
    """Lag per partition of ``group`` as ``kafka-consumer-groups --describe`` reports it.

    None where the tool printed ``-`` (no committed offset).
    """
    out = run_tool(
        CONSUMER_GROUPS, ["--bootstrap-server", bootstrap, "--describe", "--group", group]
    )
    lags: dict[tuple[str, int], int | None] = {}
    header: list[str] | None = None
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == ["GROUP", "TOPIC"]:
            header = cells
            continue
        if header is None or len(cells) < len(header) or cells[0] != group:
            continue
        row = dict(zip(header, cells, strict=False))
        lag = row["LAG"]
        lags[(row["TOPIC"], int(row["PARTITION"]))] = None if lag == "-" else int(lag)
    return lags
