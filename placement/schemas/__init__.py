"""JSON schemas of request bodies and query strings, one module per resource."""
