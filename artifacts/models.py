"""Artifacts models."""
