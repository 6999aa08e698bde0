"""Standing context files, their instruction ledger, and pre-registered with/without evaluations."""
