"""Pure trace analytics: plain data in, dataclasses out. Nothing here imports Django."""
