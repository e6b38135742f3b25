"""The websocket side of daphne: the socket middleware (origin, session, back-pressure) and
the process-wide listener that passes a sign-out to the sockets it ends."""
