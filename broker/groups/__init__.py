"""The group coordinator (classic consumer-group protocol)."""
