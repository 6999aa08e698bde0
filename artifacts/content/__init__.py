"""Pure byte-stream machinery for artifacts: redaction, line index, token estimate, reads, search.

Nothing here imports Django: plain bytes and binary files in, dataclasses out.
"""
