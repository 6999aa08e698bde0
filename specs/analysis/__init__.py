"""Pure spec content logic: canonical items, fingerprints, keys and diffs. No Django imports here."""
