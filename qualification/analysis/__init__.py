"""Pure statistics for qualification sweeps and paired comparisons. No Django imports here."""
