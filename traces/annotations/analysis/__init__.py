"""Pure analysis for divergence annotations: no Django imports."""
