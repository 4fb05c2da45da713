"""The compile service's Python client (see its class Client)."""
