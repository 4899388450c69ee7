"""kgserve's HTTP layer: the routes and what they use per request (intake, limits, priority classes, the streamed
analysis response and its bounded outbox, access log, auth, metrics, readiness, the connection guard, OpenAPI
docs). The app that puts them together is `kgserve.app`."""
