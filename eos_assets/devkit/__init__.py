"""Tools around the product, not part of it: the embedded Kafka broker, the demo producer and
its event generator, and the manifests of what a producer committed."""
