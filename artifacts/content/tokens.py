"""The documented token estimator: a cost shown before loading, labelled "estimated".

It is a byte-class heuristic, not a tokenizer. ASCII text and code average about four
bytes per token in the BPE tokenizers current models use; non-ASCII UTF-8 (accents, CJK,
emoji) packs fewer bytes into a token, so those bytes count at three per token. Logs dense
in digits, hashes and punctuation tokenize more finely than prose, so treat the figure as
an order of magnitude for deciding whether to load, not as a bill.
"""

from __future__ import annotations

import math

ASCII_BYTES_PER_TOKEN = 4.0
NON_ASCII_BYTES_PER_TOKEN = 3.0
_ASCII = bytes(range(128))


def tokens_for(*, ascii_bytes: int, non_ascii_bytes: int) -> int:
    return math.ceil(
        ascii_bytes / ASCII_BYTES_PER_TOKEN + non_ascii_bytes / NON_ASCII_BYTES_PER_TOKEN
    )


class TokenEstimator:
    """Counts ASCII and non-ASCII bytes as they stream past."""

    def __init__(self) -> None:
        self.ascii_bytes = 0
        self.non_ascii_bytes = 0

    def update(self, chunk: bytes) -> None:
        if chunk.isascii():
            self.ascii_bytes += len(chunk)
            return
        non_ascii = len(chunk.translate(None, _ASCII))
        self.non_ascii_bytes += non_ascii
        self.ascii_bytes += len(chunk) - non_ascii

    @property
    def tokens(self) -> int:
        return tokens_for(ascii_bytes=self.ascii_bytes, non_ascii_bytes=self.non_ascii_bytes)


def estimate_tokens(data: bytes) -> int:
    estimator = TokenEstimator()
    estimator.update(data)
    return estimator.tokens
