"""Pure readers for uploads: repository listings and evaluation trials."""
