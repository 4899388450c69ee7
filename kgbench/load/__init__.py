"""Stage 2, the load: the traffic (positions -> queries), the load generator and its senders, latency figures."""
