"""A replicated Kafka against one node: ingest and the graph from empty on the same stream, once
from the one-node broker and once from a 3-node cluster (RF 3, min ISR 2, ``devkit/cluster.py``)
in one run; then the time from a broker's SIGKILL to the next successful ingest.

After one uncounted pass (the JVM's warm-up), the runs alternate (one-node ingest, cluster
ingest, one-node graph, cluster graph) in one Spark session. For the kill, a batch is produced
to the cluster, the leader of partition 0 is SIGKILLed, and bronze runs until one run succeeds
(with the product's retries the first does); the node is restarted afterwards.
"""

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from eos_assets.bench.lake import BRONZE, DERIVED, UNCAPPED, BenchLake, start_spark
from eos_assets.bench.options import BenchOptions
from eos_assets.bench.report import Measurement, time_ratio
from eos_assets.bench.stream import Stream
from eos_assets.devkit import cluster
from eos_assets.lib.errors import EosError
from eos_assets.lib.kafka.kafka_admin import topic_metadata

_RUNS_AFTER_KILL = 5  # at most: a run that still fails after these is the stage's failure


def cluster_stage(o: BenchOptions, work: Path, bootstrap: str, client: dict) -> list[Measurement]:
    """Ingest and the graph from empty at ``o.events`` events, 3 nodes against one; the time
    from a broker kill to the next successful ingest of ``o.batch`` more events."""
    start_spark(o.master)
    began = time.monotonic()
    info = cluster.start_cluster(work / "cluster")
    started = time.monotonic() - began
    try:
        one = Stream(bootstrap, client, work, "one-node", o.producers)
        cluster_client = {"bootstrap.servers": info.bootstrap}
        three = Stream(info.bootstrap, cluster_client, work, "three-nodes", o.producers)
        rates = {"one": one.extend(o.events), "three": three.extend(o.events)}
        lakes = {
            "1 node": BenchLake(work / "lake-one", bootstrap, one.topic, o.master),
            "3 nodes": BenchLake(work / "lake-three", info.bootstrap, three.topic, o.master),
        }
        BenchLake(work / "lake-warm-up", bootstrap, one.topic, o.master).materialize(
            [*BRONZE, *DERIVED], UNCAPPED
        )
        ingest = {k: lake.materialize(BRONZE, UNCAPPED).wall for k, lake in lakes.items()}
        graph = {k: lake.materialize(DERIVED).wall for k, lake in lakes.items()}
        three.extend(o.batch)
        info, recovery, attempts = _kill_to_success(info, lakes["3 nodes"], three.topic)
    finally:
        cluster.stop_cluster(info)
    produce = {k: r["events_per_s"] for k, r in rates.items()}
    return [
        time_ratio(
            "ingest",
            f"ingest from empty, 3 nodes / 1 node at {o.events:,} events",
            ingest,
            "3 nodes",
            "1 node",
        ),
        time_ratio(
            "graph",
            f"derived assets from empty, 3 nodes / 1 node at {o.events:,}",
            graph,
            "3 nodes",
            "1 node",
        ),
        Measurement(
            "cluster",
            "broker SIGKILL to the next successful ingest (3 nodes)",
            round(recovery, 1),
            "s",
            detail=f"{attempts} run(s), {o.batch:,} new events, the leader of partition 0 "
            f"killed; cluster started in {started:.0f} s; producer {produce['three']:,.0f} "
            f"events/s on 3 nodes, {produce['one']:,.0f} on one",
            data={"attempts": attempts, "produce_events_per_s": produce},
        ),
    ]


def _kill_to_success(
    info: cluster.ClusterInfo, lake: BenchLake, topic: str
) -> tuple[cluster.ClusterInfo, float, int]:
    """Kill the leader of ``topic[0]``, run bronze until a run succeeds; restart the node."""
    admin = AdminClient({"bootstrap.servers": info.bootstrap})
    leader = topic_metadata(admin, info.bootstrap, 10, topic).topics[topic].partitions[0].leader
    cluster.kill_node(info, leader)
    killed = time.monotonic()
    attempt = 1
    while True:
        try:
            lake.materialize(BRONZE, UNCAPPED)
            break
        except EosError:
            if attempt == _RUNS_AFTER_KILL:
                raise
            attempt += 1
    recovery = time.monotonic() - killed
    return cluster.restart_node(info, leader), recovery, attempt
