"""``nbdist.python.util``: aliases of ``tensorflow.python.util`` modules."""
