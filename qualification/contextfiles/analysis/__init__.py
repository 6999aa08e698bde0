"""Pure analysis for context files: parsing, categories, instruction diffs, drift checks, charts."""
