"""``nbdist.python.framework``: aliases of ``tensorflow.python.framework`` modules."""
