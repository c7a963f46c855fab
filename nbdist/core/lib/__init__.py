"""``tensorflow.core.lib``: see ``nbdist.core.lib.core``."""
