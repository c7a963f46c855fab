"""``nd.data``'s datasets and iterators as graph ops (``data_ops``) and the
file datasets (``file_datasets``); the public names are on ``nd.data``."""
