"""A crash hunt for multi-model mode: many threads loading, unloading and invoking TorchScript models at once.

    docker run --rm mce-framework/pytorch python3 -m mce_serving.stress [--seconds 30] [--clients 8] [--http]

It writes --models TorchScript MLPs (64 -> --hidden -> --hidden -> 10, as examples/mme's) with their own
code/inference.py, and a few broken ones (an inference.py that raises on import, a model.pt that is not
TorchScript), and runs --clients threads that do what mce's manager does, only less politely: invoke a model
(90 % of the calls go to the first ten), load it on 404, unload a random loaded one on 507, now and then
unload a model that other threads are invoking or load a broken one. MCE_MODEL_MEMORY_MB is small, so that
most loads are refused after they are measured and models come and go all the time.

By default the threads call the multi-model WSGI application in a child process (no HTTP: many more calls a
second, and the same code paths); the child dying of a signal is the failure looked for. With --http it
starts ``serve`` (gunicorn, one worker, --threads threads) on a loopback port instead and the threads are
HTTP clients; a worker that died shows in the server's log (SIGSEGV, "Fatal Python error", or gunicorn
booting a second worker). --burn processes spin on the CPU meanwhile (the crashes showed on busy machines).

It fails (exit status 1) when the process serving the models died, when a load answered what the API never
answers, or when a model that answered its load did not answer its invoke with its own name. With
PYTHONFAULTHANDLER=1 (set here) a crashing process prints every thread's stack.

It found this (Debian's torch 1.13, Python 3.11): the default predict_fn once read the model's parameters
(``next(model.parameters()).device``) on every call; with TorchScript models freed by the garbage collector
while other threads ran, the worker died of SIGSEGV within 30 s in 4 of 6 runs (see frameworks.py).
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

PORT = 18090
CRASH = re.compile(r"SIGSEGV|SIGABRT|SIGBUS|Fatal Python error|Segmentation fault|was sent SIG|exited with code -|"
                   r"Worker \(pid:\d+\) exited")


def write_models(root, n, hidden):
    """n good models m000… and the broken ones; returns their names."""
    import io
    import torch
    code = ("import json\nimport torch\n\nMODEL_NAME = %r\n\n\ndef output_fn(prediction, accept):\n"
            "    probs = torch.softmax(prediction, dim=1)\n"
            "    return json.dumps({'model': MODEL_NAME, 'predictions': probs.argmax(dim=1).tolist()}), "
            "'application/json'\n")
    torch.set_num_threads(1)
    names = []
    for i in range(n):
        name = "m%03d" % i
        torch.manual_seed(i)
        net = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                  torch.nn.ReLU(), torch.nn.Linear(hidden, 10)).eval()
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(net), buf)
        d = os.path.join(root, name, "model")
        os.makedirs(os.path.join(d, "code"))
        with open(os.path.join(d, "model.pt"), "wb") as f:
            f.write(buf.getvalue())
        with open(os.path.join(d, "code", "inference.py"), "w") as f:
            f.write(code % name)
        names.append(name)
    bad = os.path.join(root, "bad-import", "model")
    os.makedirs(os.path.join(bad, "code"))
    shutil.copy(os.path.join(root, names[0], "model", "model.pt"), bad)
    with open(os.path.join(bad, "code", "inference.py"), "w") as f:
        f.write("import torch\nWEIGHTS = torch.ones(256, 256)\nraise RuntimeError('broken on purpose')\n")
    bad = os.path.join(root, "bad-model", "model")
    os.makedirs(bad)
    with open(os.path.join(bad, "model.pt"), "wb") as f:
        f.write(b"not torchscript")
    return names


class Client:
    """One keep-alive connection, as mce holds them."""

    def __init__(self):
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException) as e:
                self.conn.close()
                self.conn = None
                if attempt:
                    return 0, str(e).encode()
        return 0, b""


class WSGIClient:
    """Calls the WSGI application in this process, as a server thread would."""

    def __init__(self, app):
        self.app = app

    def call(self, method, path, body=None):
        from .tests.helpers import call
        st, _, out = call(self.app, method, path, body or b"",
                          {"Content-Type": "application/json"} if body is not None else None)
        return st, out


class Run:
    def __init__(self, args, root, names):
        self.args, self.root, self.names = args, root, names
        self.stop = time.monotonic() + args.seconds
        self.mu = threading.Lock()
        self.counts = {}
        self.problems = []
        self.body = json.dumps([[0.5] * 64, [0.25] * 64]).encode()

    def count(self, what):
        with self.mu:
            self.counts[what] = self.counts.get(what, 0) + 1

    def problem(self, msg):
        with self.mu:
            if len(self.problems) < 20:
                self.problems.append(msg)
        self.count("problem")

    def pick(self, rnd):
        if rnd.random() < 0.9:
            return self.names[rnd.randrange(min(10, len(self.names)))]
        return rnd.choice(self.names)

    def load(self, c, rnd, name):
        url = os.path.join(self.root, name, "model")
        for _ in range(20):
            st, body = c.call("POST", "/models", json.dumps({"model_name": name, "url": url}).encode())
            self.count("load %d" % st)
            if st in (200, 409):
                return True
            if st == 507:
                self.evict(c, rnd, name)
                continue
            if st == 0:
                self.problem("load %s: no answer (%s)" % (name, body[:200]))
            else:
                self.problem("load %s: %d %s" % (name, st, body[:200]))
            return False
        return False

    def evict(self, c, rnd, keep):
        st, body = c.call("GET", "/models")
        if st != 200:
            self.problem("list: %d %s" % (st, body[:200]))
            return
        loaded = [m["modelName"] for m in json.loads(body)["models"] if m["modelName"] != keep]
        if loaded:
            st, _ = c.call("DELETE", "/models/" + rnd.choice(loaded))
            self.count("unload %d" % st)

    def client(self, seed, make_client=Client):
        rnd = random.Random(seed)
        c = make_client()
        while time.monotonic() < self.stop:
            r = rnd.random()
            if r < 0.03:  # a broken model: the load fails (500) and must leave nothing behind
                name = rnd.choice(("bad-import", "bad-model"))
                st, body = c.call("POST", "/models", json.dumps(
                    {"model_name": name, "url": os.path.join(self.root, name, "model")}).encode())
                self.count("bad load %d" % st)
                if st not in (500, 507, 409):
                    self.problem("broken load %s: %d %s" % (name, st, body[:200]))
                continue
            if r < 0.08:  # an unload racing with the invocations of the same (hot) model
                st, _ = c.call("DELETE", "/models/" + self.pick(rnd))
                self.count("unload %d" % st)
                continue
            name = self.pick(rnd)
            for _ in range(5):
                st, body = c.call("POST", "/models/%s/invoke" % name, self.body)
                self.count("invoke %d" % st)
                if st == 200:
                    got = json.loads(body).get("model")
                    if got != name:
                        self.problem("invoke %s answered as %r" % (name, got))
                    break
                if st == 404:
                    if not self.load(c, rnd, name):
                        break
                    continue
                if st == 0:
                    self.problem("invoke %s: no answer (%s)" % (name, body[:200]))
                else:
                    self.problem("invoke %s: %d %s" % (name, st, body[:200]))
                break


def burners(n, seconds):
    return [subprocess.Popen([sys.executable, "-c", "import time\nt=time.monotonic()+%f\n"
                              "while time.monotonic()<t: pass" % seconds]) for _ in range(n)]


def child(args):
    """Serves the models under args.child with the multi-model application and hammers it from threads, in
    this process; prints the counts as one JSON line."""
    import faulthandler
    faulthandler.enable()
    from .multimodel import MultiModelApp
    from .settings import Settings
    names = sorted(n for n in os.listdir(args.child) if n.startswith("m"))
    app = MultiModelApp(Settings({"SAGEMAKER_MULTI_MODEL": "true", "MCE_FRAMEWORK": "pytorch",
                                  "MCE_MODELS_DIR": args.child, "MCE_MODEL_MEMORY_MB": str(args.memory_mb)}),
                        models_root=args.child)
    run = Run(args, args.child, names)
    threads = [threading.Thread(target=run.client, args=(i, lambda: WSGIClient(app)), daemon=True)
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"counts": run.counts, "problems": run.problems}), flush=True)
    return 0


def run_child(args, work, root):
    env = dict(os.environ, PYTHONFAULTHANDLER="1", MCE_FRAMEWORK="pytorch")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "mce_serving.stress", "--child", root, "--seconds", str(args.seconds),
           "--clients", str(args.clients), "--memory-mb", str(args.memory_mb)]
    bs = burners(args.burn, args.seconds + 5)
    try:
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.seconds + 300)
    finally:
        for b in bs:
            b.kill()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    out = res.stdout.decode("utf-8", "replace")
    result = None
    for ln in out.splitlines():
        if ln.startswith("{\"counts\""):
            result = json.loads(ln)
    failed = False
    if res.returncode != 0 or result is None:
        failed = True
        how = "signal %d" % -res.returncode if res.returncode < 0 else "exit status %d" % res.returncode
        print("stress: THE PROCESS SERVING THE MODELS DIED (%s)" % how)
        i = out.find("Fatal Python error")
        print(out[i:i + 8000] if i >= 0 else out[-4000:])
    else:
        print("stress: %.0f s, %d client threads in one process; %s" % (
            args.seconds, args.clients, ", ".join("%s: %d" % kv for kv in sorted(result["counts"].items()))))
        if result["problems"]:
            failed = True
            print("stress: %d problems, first ones:" % result["counts"].get("problem", 0))
            for m in result["problems"]:
                print("  " + m)
    print("stress: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--threads", type=int, default=8, help="the server's threads (SAGEMAKER_MODEL_SERVER_WORKERS)")
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--memory-mb", type=int, default=40, help="MCE_MODEL_MEMORY_MB")
    p.add_argument("--burn", type=int, default=0, help="processes spinning on the CPU meanwhile")
    p.add_argument("--log-lines", type=int, default=60)
    p.add_argument("--http", action="store_true", help="through gunicorn and HTTP (default: in a child process)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # the models folder: serve and hammer in this process
    args = p.parse_args(argv)
    if args.child:
        return child(args)

    work = tempfile.mkdtemp(prefix="mce-stress-")
    # Under /opt/ml/models where it can be (as root in the image; toolkits before MCE_MODELS_DIR serve only there).
    try:
        os.makedirs("/opt/ml/models", exist_ok=True)
        root = tempfile.mkdtemp(prefix="stress-", dir="/opt/ml/models")
    except OSError:
        root = os.path.join(work, "models")
    t0 = time.monotonic()
    names = write_models(root, args.models, args.hidden)
    print("stress: %d models in %.1f s" % (len(names), time.monotonic() - t0), flush=True)
    if not args.http:
        return run_child(args, work, root)
    env = dict(os.environ, SAGEMAKER_MULTI_MODEL="true", MCE_FRAMEWORK="pytorch", MCE_MODELS_DIR=root,
               MCE_MODEL_MEMORY_MB=str(args.memory_mb), SAGEMAKER_BIND_TO_PORT=str(PORT), MCE_BIND_HOST="127.0.0.1",
               SAGEMAKER_MODEL_SERVER_WORKERS=str(args.threads), PYTHONFAULTHANDLER="1",
               MCE_SERVING_SERVER="gunicorn")
    log_path = os.path.join(work, "server.log")
    log = open(log_path, "w")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    server = subprocess.Popen([sys.executable, "-m", "mce_serving", "serve"], env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    bs = []
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
                c = Client()
                if c.call("GET", "/ping")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                print(open(log_path).read()[-4000:])
                print("stress: the server did not start")
                return 2
            time.sleep(0.2)
        run = Run(args, root, names)
        bs = burners(args.burn, args.seconds + 5)
        threads = [threading.Thread(target=run.client, args=(i,), daemon=True) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for b in bs:
            b.kill()
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    text = open(log_path, errors="replace").read()
    lines = text.splitlines()
    crashes = [ln for ln in lines if CRASH.search(ln)]
    boots = sum("Booting worker" in ln for ln in lines)
    print("stress: %.0f s, %d clients, %d server threads; %s" % (
        args.seconds, args.clients, args.threads,
        ", ".join("%s: %d" % kv for kv in sorted(run.counts.items()))))
    failed = False
    if crashes or boots > 1:
        failed = True
        print("stress: THE WORKER DIED (%d worker boots):" % boots)
        for ln in crashes[:10]:
            print("  " + ln)
        # The faulthandler dump: the lines from "Fatal Python error" on.
        i = text.find("Fatal Python error")
        if i >= 0:
            print(text[i:i + 6000])
    if run.problems:
        failed = True
        print("stress: %d problems, first ones:" % run.counts.get("problem", 0))
        for m in run.problems:
            print("  " + m)
    if args.log_lines:
        print("stress: the server's log ends with:")
        for ln in lines[-args.log_lines:]:
            print("  " + ln)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    print("stress: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
