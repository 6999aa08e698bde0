"""Analytics models."""
