"""Latency of the real-framework examples through mce, for scripts/framework-bench.sh.

    python3 bench/framework_bench.py chain URL METRICS_URL DIGITS_EXPECTED_JSON [N]
    python3 bench/framework_bench.py mme   URL METRICS_URL MANIFEST_JSON

Standard library only. Requests go unsigned (mce without --credentials takes them) over one
keep-alive connection, one at a time, to URL, which must be loopback. Client-side times are exact
per request; mce's ModelLatency / OverheadLatency / ContainerLatency come from its Prometheus
histograms (microseconds): the mean exactly (_sum / _count), p50 and p99 interpolated inside
the histogram's buckets (each bucket is 2.5 times the previous, so these are estimates).
"""
import http.client
import json
import re
import sys
import time
import urllib.parse


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Client:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)

    def invoke(self, endpoint, body, content_type, accept="application/json", target_model=None):
        headers = {"Content-Type": content_type, "Accept": accept}
        if target_model:
            headers["X-Amzn-SageMaker-Target-Model"] = target_model
        t0 = time.perf_counter()
        self.conn.request("POST", f"/endpoints/{endpoint}/invocations", body=body, headers=headers)
        resp = self.conn.getresponse()
        data = resp.read()
        ms = (time.perf_counter() - t0) * 1000
        if resp.status != 200:
            raise RuntimeError(f"{endpoint} {target_model or ''}: HTTP {resp.status}: {data[:300]!r}")
        return ms, data


def scrape(metrics_url):
    u = urllib.parse.urlsplit(metrics_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", u.path or "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def series(text, name, *labels):
    """{le or "": value} of the series name{...} whose labels hold all of labels, summed."""
    out = {}
    pat = re.compile(r"^" + re.escape(name) + r"\{([^}]*)\} (\S+)$", re.M)
    for m in pat.finditer(text):
        lab = m.group(1)
        if all(l in lab for l in labels):
            le = re.search(r'le="([^"]*)"', lab)
            key = le.group(1) if le else ""
            out[key] = out.get(key, 0.0) + float(m.group(2))
    return out


def hist(before, after, name, *labels):
    """count, mean, p50, p99 (µs) of histogram name (in seconds) between two scrapes."""
    b = series(before, name + "_bucket", *labels)
    a = series(after, name + "_bucket", *labels)
    count = series(after, name + "_count", *labels).get("", 0) - series(before, name + "_count", *labels).get("", 0)
    total = series(after, name + "_sum", *labels).get("", 0) - series(before, name + "_sum", *labels).get("", 0)
    if count <= 0:
        return 0, 0, 0, 0
    bounds = sorted((float(k) for k in a if k != "+Inf"))
    cum = [(ub, a.get(_key(a, ub), 0) - b.get(_key(a, ub), 0)) for ub in bounds]

    def q(p):
        rank, lo, prev = p * count, 0.0, 0.0
        for ub, c in cum:
            if c >= rank:
                return lo + (ub - lo) * ((rank - prev) / max(c - prev, 1e-9))
            lo, prev = ub, c
        return bounds[-1]
    return int(count), total / count * 1e6, q(0.5) * 1e6, q(0.99) * 1e6


def _key(d, ub):
    for k in d:
        if k != "+Inf" and float(k) == ub:
            return k
    return ""


def row(label, count, mean, p50, p99):
    print(f"| {label} | {count} | {p50 / 1000:.2f} | {p99 / 1000:.2f} | {mean / 1000:.2f} |")


def chain(url, metrics_url, expected, n=500):
    exp = json.load(open(expected))
    rows = [",".join(repr(v) for v in r) + "\n" for r in exp["rows"]]
    c = Client(url)
    for i in range(20):  # warm-up
        c.invoke("preprocess-inference", rows[i % len(rows)], "text/csv", "text/csv")
    before = scrape(metrics_url)
    times, correct = [], 0
    for i in range(n):
        ms, data = c.invoke("preprocess-inference", rows[i % len(rows)], "text/csv", "text/csv")
        times.append(ms)
        correct += int(data.decode().strip()) == exp["labels"][i % len(rows)]
    after = scrape(metrics_url)
    ep = 'endpoint="preprocess-inference"'
    print(f"\n### Chain preprocess-inference (scikit-learn -> PyTorch), {n} sequential calls of one image, "
          f"1 client; {correct}/{n} correct\n")
    print("| what | calls | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|---|")
    row("client round trip (exact)", n, sum(times) / n * 1000, percentile(times, 0.5) * 1000,
        percentile(times, 0.99) * 1000)
    for name, labels, label in [
        ("mce_model_latency_seconds", (ep,), "ModelLatency (both containers)"),
        ("mce_container_latency_seconds", (ep, 'container="preprocess"'), "ContainerLatency preprocess (sklearn)"),
        ("mce_container_latency_seconds", (ep, 'container="network"'), "ContainerLatency network (PyTorch)"),
        ("mce_overhead_latency_seconds", (ep,), "OverheadLatency (mce, both hops)"),
    ]:
        row(label + " (histogram)", *hist(before, after, name, *labels))


def mme(url, metrics_url, manifest):
    man = json.load(open(manifest))["models"]
    c = Client(url)
    ep = 'endpoint="mme"'

    def calls(idx):
        out = []
        for i in idx:
            m = man[i]
            ms, data = c.invoke("mme", json.dumps(m["request"]), "application/json", target_model=m["target_model"])
            got = json.loads(data)
            if got["model"] != m["response"]["model"] or got["predictions"] != m["response"]["predictions"]:
                raise RuntimeError(f"{m['target_model']}: {data[:200]!r}")
            out.append(ms)
        return out

    m0 = scrape(metrics_url)
    cold = calls(range(len(man)))                   # first call of every model: fetch, extract, load (evicting)
    m1 = scrape(metrics_url)
    # The models still loaded are the most recent ones (LRU): call them in the same order, 200 calls.
    k = max(1, int(series(m1, "mce_loaded_models", ep).get("", 1)))
    recent = list(range(len(man) - k, len(man)))
    warm = calls((recent * (200 // k + 1))[:200])
    m2 = scrape(metrics_url)
    reload_ = calls(range(50))                      # the first 50 were evicted: load again (already on disk)
    m3 = scrape(metrics_url)

    def count(before, after, name):
        return int(series(after, name, ep).get("", 0) - series(before, name, ep).get("", 0))
    print(f"\n### Multi-model endpoint mme: {len(man)} PyTorch models, budget MCE_MODEL_MEMORY_MB from "
          f"examples/mme/endpoint.yaml, sequential calls, 1 client\n")
    print("| phase | calls | loads | evictions | cache hits | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|---|---|---|---|")
    for label, t, b, a in [("cold: first call of each model (download+extract+load)", cold, m0, m1),
                           (f"warm: the {k} loaded models", warm, m1, m2),
                           ("reload: evicted models, already extracted", reload_, m2, m3)]:
        print(f"| {label} | {len(t)} | {count(b, a, 'mce_model_loading_seconds_count')} | "
              f"{count(b, a, 'mce_model_evictions_total')} | {count(b, a, 'mce_model_cache_hits_total')} | "
              f"{percentile(t, 0.5):.2f} | {percentile(t, 0.99):.2f} | {sum(t) / len(t):.2f} |")
    loaded = series(m3, "mce_loaded_models", ep).get("", 0)
    print(f"\nLoaded at the end: {int(loaded)} of {len(man)}.")
    print("| mce histogram, whole run | calls | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|---|")
    for name, cw in (("mce_model_loading_seconds", "ModelLoadingTime"),
                     ("mce_model_loading_wait_seconds", "ModelLoadingWaitTime"),
                     ("mce_model_downloading_seconds", "ModelDownloadingTime"),
                     ("mce_model_unloading_seconds", "ModelUnloadingTime"),
                     ("mce_model_latency_seconds", "ModelLatency"), ("mce_overhead_latency_seconds", "OverheadLatency")):
        row(f"{name} ({cw})", *hist(m0, m3, name, ep))


if __name__ == "__main__":
    kind, url, metrics_url, path = sys.argv[1:5]
    if kind == "chain":
        chain(url, metrics_url, path, int(sys.argv[5]) if len(sys.argv) > 5 else 500)
    else:
        mme(url, metrics_url, path)
