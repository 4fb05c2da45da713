"""What compiles keep between runs: the content-addressed compile cache (`cache.py`); the
tuner's results will be stored here too, for the drivers to look up."""
