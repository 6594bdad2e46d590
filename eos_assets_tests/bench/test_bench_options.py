"""``eos-assets bench --only``: the cluster and continuous stages run only when named, and
alone."""

import argparse

import pytest

from eos_assets.bench.options import STAGES, add_bench_arguments, bench_options
from eos_assets.lib.errors import ConfigError


def _options(*argv: str):
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return bench_options(parser.parse_args(list(argv)))


def test_the_cluster_and_continuous_stages_are_not_defaults_and_run_alone() -> None:
    assert _options().only == STAGES and not _options().runs("cluster")
    assert not _options().runs("continuous")
    assert _options("--only", "cluster").only == ("cluster",)
    with pytest.raises(ConfigError, match="cluster runs alone"):
        _options("--only", "cluster,ingest")
    with pytest.raises(ConfigError, match="continuous runs alone"):
        _options("--only", "freshness,continuous")
    with pytest.raises(ConfigError, match=r"choose from .*freshness, cluster, continuous"):
        _options("--only", "clusters")
