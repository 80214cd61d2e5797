"""A panel of judges: their record scores pooled, and how well they agree."""
