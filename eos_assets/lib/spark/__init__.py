"""Spark: session settings, jars, Java, the class archive, and the warm Spark Connect server."""
