"""SQL for the projections: their tables and the statements that read and write them.

This is the only part of ``projections`` that speaks SQLAlchemy.
"""
