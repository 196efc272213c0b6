"""Warm-call overhead of the serving layer over calling the model in-process.

    docker run --rm mce-framework/sklearn python3 -m mce_serving.bench [--calls N] [--rows R]
    docker run --rm mce-framework/pytorch python3 -m mce_serving.bench

It writes a small model of the image's framework (scikit-learn: LinearRegression on 10 features;
PyTorch: a TorchScript 10-64-1 MLP) and an inference.py with model_fn only, starts `serve` on a
loopback port inside the container with one worker, and times N warm calls three ways:

  predict      the model called in-process (model.predict / model(tensor) under no_grad)
  handler      the toolkit's hooks in-process: decode JSON, predict, encode JSON (no HTTP)
  http         POST /invocations over one keep-alive connection (the whole serving layer)

and prints p50 / p99 / mean in milliseconds, and http − predict at p50 (the serving layer's cost).
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

PORT = 18080


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def summary(name, xs):
    ms = [x * 1000 for x in xs]
    return {"name": name, "p50_ms": round(pct(ms, 50), 4), "p99_ms": round(pct(ms, 99), 4),
            "mean_ms": round(statistics.fmean(ms), 4)}


def write_model(framework, d):
    os.makedirs(os.path.join(d, "code"))
    rng = np.random.default_rng(7)
    if framework == "pytorch":
        import torch
        torch.manual_seed(7)
        net = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        torch.jit.save(torch.jit.script(net.eval()), os.path.join(d, "model.pt"))
        return  # the PyTorch defaults need no code at all
    import joblib
    from sklearn.linear_model import LinearRegression
    x = rng.normal(size=(200, 10))
    joblib.dump(LinearRegression().fit(x, x @ np.arange(10.0)), os.path.join(d, "model.joblib"))
    with open(os.path.join(d, "code", "inference.py"), "w") as f:
        f.write("import os, joblib\n\ndef model_fn(model_dir):\n"
                "    return joblib.load(os.path.join(model_dir, 'model.joblib'))\n")


def time_calls(fn, n):
    for _ in range(min(50, n)):  # warm up
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=1)
    args = ap.parse_args(argv)
    framework = os.environ.get("MCE_FRAMEWORK", "sklearn")
    rows = np.random.default_rng(1).normal(size=(args.rows, 10)).round(4)
    body = json.dumps(rows.tolist()).encode()

    with tempfile.TemporaryDirectory() as d:
        write_model(framework, d)
        env = dict(os.environ, MCE_MODEL_DIR=d, SAGEMAKER_SUBMIT_DIRECTORY=os.path.join(d, "code"),
                   SAGEMAKER_BIND_TO_PORT=str(PORT), SAGEMAKER_MODEL_SERVER_WORKERS="1",
                   SAGEMAKER_CONTAINER_LOG_LEVEL="30")
        server = subprocess.Popen([sys.executable, "-m", "mce_serving", "serve"], env=env)
        try:
            # The server first, so that its start does not share the CPU with the in-process timing.
            deadline = time.monotonic() + 120
            while True:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
                    c.request("GET", "/ping")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("bench: the server did not start")
                time.sleep(0.1)
            # In-process: the same model and hooks, loaded here.
            from .handler import Handler
            from . import usercode
            module = usercode.import_private(os.path.join(d, "code"), "inference.py", "mce_bench_user")
            h = Handler(module, d, framework)
            h.load()
            if framework == "pytorch":
                import torch
                torch.set_num_threads(1)  # as the one server worker
                t = torch.from_numpy(rows.astype(np.float32))

                def predict():
                    with torch.no_grad():
                        h.model(t)
            else:
                x = rows.astype(np.float32)

                def predict():
                    h.model.predict(x)

            results = [summary("predict", time_calls(predict, args.calls)),
                       summary("handler", time_calls(lambda: h.invoke(body, "application/json", "application/json"),
                                                     args.calls))]
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
            headers = {"Content-Type": "application/json", "Accept": "application/json"}

            def call():
                conn.request("POST", "/invocations", body, headers)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise SystemExit("bench: %d %s" % (r.status, data[:200]))

            results.append(summary("http", time_calls(call, args.calls)))
        finally:
            server.terminate()
            server.wait(30)
    by = {r["name"]: r for r in results}
    print(json.dumps({"framework": framework, "calls": args.calls, "rows": args.rows, "results": results,
                      "serving_overhead_p50_ms": round(by["http"]["p50_ms"] - by["predict"]["p50_ms"], 4),
                      "http_over_handler_p50_ms": round(by["http"]["p50_ms"] - by["handler"]["p50_ms"], 4)},
                     indent=1))


if __name__ == "__main__":
    main()
