"""One request to one endpoint: transport, failures, limits and what the endpoint accepts."""
