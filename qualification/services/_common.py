"""Helpers shared by the qualification service modules."""


def _user(actor):
    return actor if getattr(actor, "pk", None) else None
