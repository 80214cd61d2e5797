"""A run of the judge stage: the worker pool, its feed and writer, progress and budget."""
