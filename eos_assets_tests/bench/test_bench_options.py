"""``eos-assets bench --only``: the cluster stage runs only when named, and alone."""

import argparse

import pytest

from eos_assets.bench.options import STAGES, add_bench_arguments, bench_options
from eos_assets.lib.errors import ConfigError


def _options(*argv: str):
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return bench_options(parser.parse_args(list(argv)))


def test_the_cluster_stage_is_not_a_default_and_runs_alone() -> None:
    assert _options().only == STAGES and not _options().runs("cluster")
    assert _options("--only", "cluster").only == ("cluster",)
    with pytest.raises(ConfigError, match="cluster runs alone"):
        _options("--only", "cluster,ingest")
    with pytest.raises(ConfigError, match=r"choose from .*freshness, cluster"):
        _options("--only", "clusters")
