"""The options of `eos-assets demo`, apart from the demo itself.

The command line reads them without importing the demo, which imports the streams'
definitions: a wrong declaration is then one line from the command, not an import's traceback.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class DemoOptions:
    """Size and shape of the demo stream."""

    count: int = 20_000
    partitions: int = 6
    seed: int | None = None
    stream: str = "orders"  # a declared stream, or an example (eos_assets/examples)
    rate: float = 1_000.0  # events per second of a continuous demo
