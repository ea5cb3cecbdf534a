"""The memory operations: commands that validate and append, queries that read projections."""
