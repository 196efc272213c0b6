"""Shared pieces of mce's end-to-end scripts (stdlib only).

Each script runs one client (boto3 or the aws CLI) per Checks object and
prints its lines at the end; the scripts add their own assertion helpers by
subclassing Checks.
"""

import re


class Checks:
    """Collects PASS/FAIL/INFO lines and counts for one client."""

    def __init__(self, client):
        self.client = client
        self.lines = []
        self.passed = 0
        self.failed = 0

    def ok(self, what, cond, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
        self.lines.append("%s [%s] %s%s" % ("PASS" if cond else "FAIL", self.client, what,
                                            (": " + detail) if detail else ""))
        return cond

    def info(self, text):
        self.lines.append("INFO [%s] %s" % (self.client, text))

    def eq(self, what, got, want):
        return self.ok(what, got == want, "%r" % (got,) if got == want else "got %r, want %r" % (got, want))

    def success(self, what, r):
        return self.ok(what + " succeeds", r.ok, "" if r.ok else repr(r))


def kebab(op):
    """CreateEndpointConfig -> create-endpoint-config (the aws CLI's names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", op).lower()
