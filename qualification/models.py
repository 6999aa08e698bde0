"""Qualification models."""
