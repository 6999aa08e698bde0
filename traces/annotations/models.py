"""Annotations models."""
