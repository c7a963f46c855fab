"""``nbdist.python.ops``: aliases of ``tensorflow.python.ops`` modules."""
