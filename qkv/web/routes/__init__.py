"""The API's routers, one module per view; each is a thin call into an application's Python API."""
