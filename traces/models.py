"""Traces models."""
