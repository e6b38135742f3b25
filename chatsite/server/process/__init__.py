"""The long-lived processes: how daphne starts (on uvloop, with the autobahn patch), the
supervisor of `manage.py serve`, the embedded Redis, and the start-up heap kept out of the
collector's walks."""
