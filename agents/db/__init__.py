"""The project's raw SQL: every statement in ``statements``, and what the database can do."""
