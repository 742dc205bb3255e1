"""The HTTP edge: the daemon's API on aiohttp, in front of the runtime.

``edge`` is the accept loop and its limits (connections, head and idle timeouts);
``middleware`` checks the Host and the token, times each request, and turns every failure
into ``{"error": code, "detail": sentence}`` (its ``STATUS`` table is the one place an error
code becomes an HTTP status); ``server`` parses a request, calls the runtime and serializes
the answer through ``condensate.api``; ``live_routes`` streams the live channel as server-sent
events; ``ui`` serves the status page.

The rule it keeps: the edge translates, it decides nothing; only the composition root
(``condensate.app``) imports it.
"""
