"""check_generated: sections marked as generated, against what generated them."""

from __future__ import annotations

from qualification.contextfiles.analysis.drift.findings import (
    ERROR,
    INFO,
    MIN_FINGERPRINT_LENGTH,
    WARNING,
    Finding,
)
from qualification.contextfiles.analysis.parsing import (
    ParsedFile,
)
from qualification.contextfiles.formats.listing import Listing

# --- generated sections ----------------------------------------------------------


def check_generated(parsed: ParsedFile, listing: Listing | None) -> list[Finding]:
    findings = []
    for section in parsed.generated:
        where = {"line": section.line_start}
        data = {"source": section.source, "fingerprint": section.fingerprint}
        if section.line_end is None:
            findings.append(Finding("generated", WARNING, "A generated section is never closed "
                                    "with <!-- end generated -->.", data=data, **where))  # fmt: skip
        if not section.source:
            findings.append(Finding("generated", WARNING, "A generated section names no source "
                                    "(from=…), so it cannot be tied to one.", data=data, **where))  # fmt: skip
            continue
        recorded = section.fingerprint.lower().split(":")[-1]
        if len(recorded) < MIN_FINGERPRINT_LENGTH:
            findings.append(
                Finding("generated", WARNING, f"The section generated from `{section.source}` "
                        "records no fingerprint (fingerprint=…), so drift cannot be detected.",
                        data=data, **where)
            )  # fmt: skip
            continue
        if listing is None or not listing.hashes:
            findings.append(
                Finding("generated", INFO, f"Cannot verify the section generated from "
                        f"`{section.source}`: choose a listing with hashes (`git ls-tree -r HEAD` "
                        "or `sha256sum` output).", data=data, **where)
            )  # fmt: skip
            continue
        current = listing.hash_of(section.source)
        if not listing.exists(section.source):
            findings.append(Finding("generated", ERROR, f"The source `{section.source}` of a "
                                    "generated section is not in the repository.", data=data,
                                    **where))  # fmt: skip
        elif not current:
            findings.append(Finding("generated", INFO, f"The listing has no hash for "
                                    f"`{section.source}`.", data=data, **where))  # fmt: skip
        elif not (current.startswith(recorded) or recorded.startswith(current)):
            findings.append(
                Finding(
                    "generated", ERROR,
                    f"The section generated from `{section.source}` is stale: it records "
                    f"fingerprint {recorded[:12]}, the source is now {current[:12]}.",
                    data=data | {"current": current}, **where,
                )
            )  # fmt: skip
    return findings
