"""Dashboard pages, one module per area."""
