"""Specifications models."""
