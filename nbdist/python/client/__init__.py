"""``nbdist.python.client``: aliases of ``tensorflow.python.client`` modules."""
