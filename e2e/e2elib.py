"""Shared pieces of mce's end-to-end scripts (stdlib only).

Each script runs one client (boto3 or the aws CLI) per Checks object and
prints its lines at the end; the scripts add their own assertion helpers by
subclassing Checks.
"""

import json
import re
import ssl
import urllib.parse
import urllib.request


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


class Res:
    """One call's outcome, the same shape for every client."""

    def __init__(self, ok, out=None, code=None, message=None, client_side=False, raw=""):
        self.ok, self.out, self.code, self.message = ok, out or {}, code, message
        self.client_side = client_side  # the client refused the request itself
        self.raw = raw

    def __repr__(self):
        if self.ok:
            return "ok %s" % json.dumps(self.out, default=str)[:300]
        if self.client_side:
            return "refused by the client: %s" % (self.message or "")[:300]
        return "error %s: %s %s" % (self.code, self.message, self.raw[-200:])


CLI_ERROR = re.compile(r"An error occurred \(([^)]*)\) when calling the (\w+) operation: (.*)")


def cli_error(err):
    """The Res of an aws CLI call that failed, from its standard error: refused by the CLI itself, or the
    service's error code and message."""
    if "Parameter validation failed" in err:
        return Res(False, client_side=True, message=err.strip(), raw=err)
    m = CLI_ERROR.findall(err)
    code, _, msg = m[-1] if m else (None, None, None)
    return Res(False, code=code, message=msg.strip() if msg else msg, raw=err)


def kebab(op):
    """CreateEndpointConfig -> create-endpoint-config (the aws CLI's names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", op).lower()


class Kube:
    """The test cluster's API server, read with its admin token (stdlib
    only); the objects of one mce instance (its --instance) by label."""

    def __init__(self, server, token_file, ca, instance):
        self.server = server
        self.instance = instance
        with open(token_file) as f:
            self.token = f.read().strip()
        self.ctx = ssl.create_default_context(cafile=ca)

    def request(self, path):
        req = urllib.request.Request(self.server + path, headers={"Authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
            return r.status, r.read()

    def get(self, path):
        return json.loads(self.request(path)[1])

    def items(self, kind, selector):
        base = {"pods": "/api/v1", "configmaps": "/api/v1"}.get(kind, "/apis/apps/v1")
        q = urllib.parse.urlencode({"labelSelector": selector})
        return self.get(f"{base}/namespaces/default/{kind}?{q}")["items"]

    def pods(self, endpoint=None, live=False):
        sel = f"mce.run/instance={self.instance}"
        if endpoint:
            sel += f",mce.run/endpoint={endpoint}"
        ps = self.items("pods", sel)
        if live:
            ps = [p for p in ps if not p["metadata"].get("deletionTimestamp")]
        return ps

    def left(self, endpoint=None):
        """Every object of this mce instance (or of its endpoint) still
        there, as kind/name."""
        sel = f"mce.run/instance={self.instance}"
        if endpoint:
            sel += f",mce.run/endpoint={endpoint}"
        return [f"{k}/{o['metadata']['name']}" for k in ("pods", "deployments", "replicasets", "configmaps")
                for o in self.items(k, sel)]
