"""Pure parsers for qualification inputs. No Django imports here."""
