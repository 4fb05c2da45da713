"""The tuner (option search over compiles; see the autotuning issue) will live here, above the
drivers it calls and beside the storage it records into."""
