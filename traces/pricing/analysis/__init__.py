"""Pure pricing: model-name matching, the cost of token counts, and the list prices. No Django."""
