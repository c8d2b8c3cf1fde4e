"""One module per resource of the API; each function serves one route."""
