"""Helpers the tests share: data, oracles, graph runners, subprocess entry points."""
