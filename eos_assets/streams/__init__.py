"""The defs folder of declared streams: one ``<stream>/defs.yaml`` of ``EventStream`` each."""
