"""A run's life in the database: claimed, its steps recorded, ended, handed back.

``base.py`` is the one interface (``RunStore``); ``portable.py`` writes through the ORM on
any database, ``postgres.py`` replaces the fenced writes with one statement each
(``agents/db/statements.py``); ``store.py``'s ``run_store()`` picks one, once, by the
capability ``fenced_statements_supported()``, and holds the functions other modules call.
``log.py`` appends to a conversation's event log; ``queue.py`` hands a run to the workers;
``reads.py`` reads what a run has stored; ``threads.py`` holds the database threads the
driver's ORM writes wait on.
"""
