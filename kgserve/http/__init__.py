"""kgserve's HTTP layer: the routes and what they use per request (the /analysis intake, its run and streamed
response with its bounded outbox, HTTP's own limits, access log, readiness, the connection guard, OpenAPI docs).
Query admission (kgserve.admission), metrics and auth are shared with /ws; this package imports nothing of
kgserve.ws. The app that puts them together is `kgserve.app`."""
