"""``nbdist.python.training``: aliases of ``tensorflow.python.training`` modules."""
