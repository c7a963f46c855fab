"""``nbdist.python.platform``: aliases of ``tensorflow.python.platform`` modules."""
