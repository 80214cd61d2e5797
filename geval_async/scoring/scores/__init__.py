"""Ratings to scores: weighted scores per record, their columns and tables, and a study's
results."""
