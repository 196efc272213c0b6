"""GPU paths (issue 19), without a GPU: a stand-in torch with CUDA devices (fakecuda.py) for the device
choice, the memory accounting, the release and the out-of-memory answers; Debian's CPU torch, where the
image has it, for the default hooks' device moves."""

import io
import json
import logging
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

from mce_serving import gpu, server
from mce_serving.app import SingleModelApp, read_body
from mce_serving.handler import Handler
from mce_serving.multimodel import MultiModelApp
from mce_serving.settings import Settings

from .fakecuda import MIB, fake_torch
from .helpers import ModelDir, call, error_of

try:
    import torch as real_torch
except ImportError:
    real_torch = None

# A model whose weights take MODEL_MIB on the current CUDA device ("cuda": the toolkit makes the model's
# device current while it loads); predict_fn answers the gpu_id its context says and the weights' device.
GPU_SCRIPT = """
import json, os
import torch

def model_fn(model_dir, context):
    with open(os.path.join(model_dir, "cfg.json")) as f:
        cfg = json.load(f)
    first = torch.empty(cfg["mib"] << 20, device="cuda")
    if cfg.get("then_mib"):
        torch.empty(cfg["then_mib"] << 20, device="cuda")  # out of memory, with first still held
    return {"weights": first, "gpu_id": context.system_properties["gpu_id"]}

def predict_fn(data, model, context):
    if data.tolist() == [[666.0]]:
        activations = torch.empty(500 << 20, device="cuda")
        torch.empty(1 << 50, device="cuda")
    if data.tolist() == [[777.0]]:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return [model["gpu_id"], model["weights"].device, context.system_properties["gpu_id"]]
"""


class messages(logging.Handler):
    """Captures the mce_serving log's messages as text only: assertLogs keeps the records, whose exc_info
    would keep an exception's frames, and the tensors they hold, alive."""

    def __enter__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        self.logger = logging.getLogger("mce_serving")
        self.level = self.logger.level
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        return self.lines

    def emit(self, record):
        self.lines.append("%s %s" % (record.levelname, record.getMessage()))

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)
        self.logger.propagate = True


class MultiModelGPUTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def app(self, free_mib, env=None):
        """A multi-model app on a host whose devices have free_mib MiB free (and the fake torch imported)."""
        self.torch = fake_torch(free_mib)
        patcher = mock.patch.dict(sys.modules, {"torch": self.torch})
        patcher.start()
        self.addCleanup(patcher.stop)
        return MultiModelApp(Settings(dict({"MCE_MODEL_MEMORY_MB": "64"}, **(env or {}))), models_root=self.root)

    def model(self, name, mib, then_mib=0):
        d = os.path.join(self.root, name)
        os.makedirs(os.path.join(d, "code"))
        with open(os.path.join(d, "code", "inference.py"), "w") as f:
            f.write(GPU_SCRIPT)
        with open(os.path.join(d, "cfg.json"), "w") as f:
            json.dump({"mib": mib, "then_mib": then_mib}, f)
        return d

    def load(self, app, name, url):
        return call(app, "POST", "/models", json.dumps({"model_name": name, "url": url}).encode(),
                    {"Content-Type": "application/json"})

    def invoke(self, app, name, body):
        return call(app, "POST", "/models/%s/invoke" % name, body, {"Content-Type": "application/json"})

    def test_model_goes_to_the_device_with_most_free_memory(self):
        app = self.app([2048, 6144, 4096])
        code, _, body = self.load(app, "a", self.model("a", 1000))
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["gpuId"], 1)
        # gpu_id is the device index at load and at invocation; "cuda" meant that device during the load.
        self.assertEqual(json.loads(self.invoke(app, "a", b"[[1]]")[2]), [1, "cuda:1", 1])
        self.assertEqual(self.torch.cuda.allocated, [0, 1000 * MIB, 0])
        # Device 1 now has 5144 MiB free, device 2 4096: the next model goes to 1 again, then to 2.
        self.assertEqual(json.loads(self.load(app, "b", self.model("b", 1500))[2])["gpuId"], 1)
        self.assertEqual(json.loads(self.load(app, "c", self.model("c", 10))[2])["gpuId"], 2)

    def test_footprint_is_reported(self):
        app = self.app([4096])
        a = self.model("a", 300)
        self.assertEqual(self.load(app, "a", a)[0], 200)
        want = {"modelName": "a", "modelUrl": a, "gpuId": 0, "gpuMemoryBytes": 300 * MIB,
                "gpuAllocatedBytes": 300 * MIB, "gpuReservedBytes": 300 * MIB, "gpuDriverBytes": 300 * MIB}
        self.assertEqual(json.loads(call(app, "GET", "/models")[2]), {"models": [want]})
        self.assertEqual(json.loads(call(app, "GET", "/models/a")[2]), want)

    def test_unload_gives_the_memory_back_to_the_driver(self):
        app = self.app([4096])
        self.assertEqual(self.load(app, "a", self.model("a", 1000))[0], 200)
        self.assertEqual(self.torch.cuda.free, [3096 * MIB])
        with self.assertLogs("mce_serving", "INFO") as logs:
            self.assertEqual(call(app, "DELETE", "/models/a")[0], 200)
        # Without empty_cache the caching allocator would keep the 1000 MiB reserved and the driver's free
        # memory would not move; and the cache is emptied only once the model's memory is no longer in use.
        self.assertEqual((self.torch.cuda.free, self.torch.cuda.reserved), ([4096 * MIB], [0]))
        self.assertIn(("empty_cache", [0]), self.torch.cuda.calls)
        self.assertIn("%d bytes came back to the driver" % (1000 * MIB), "\n".join(logs.output))

    def test_out_of_memory_during_load_is_507_and_released(self):
        app = self.app([2048])
        with messages() as logs:
            code, _, body = self.load(app, "big", self.model("big", 1000, then_mib=1500))
        self.assertEqual(code, 507, body)
        self.assertTrue(any(ln.startswith("ERROR model big: CUDA out of memory") for ln in logs), logs)
        self.assertIn("out of GPU memory", error_of(body)[2])
        # The half-loaded model's 1000 MiB are freed and back with the driver.
        self.assertEqual((self.torch.cuda.free, self.torch.cuda.allocated), ([2048 * MIB], [0]))
        self.assertEqual(json.loads(call(app, "GET", "/models")[2]), {"models": []})
        self.assertEqual(self.load(app, "fits", self.model("fits", 1500))[0], 200)

    def test_out_of_memory_during_invocation_is_507(self):
        app = self.app([2048])
        self.assertEqual(self.load(app, "a", self.model("a", 100))[0], 200)
        for body in (b"[[666]]", b"[[777]]"):  # torch.OutOfMemoryError; a RuntimeError saying so
            with self.subTest(body=body):
                with messages() as logs:
                    code, _, out = self.invoke(app, "a", body)
                self.assertTrue(any(ln.startswith("ERROR model a: CUDA out of memory") for ln in logs), logs)
                self.assertEqual(code, 507, out)
                self.assertIn("CUDA out of memory", error_of(out)[2])
                # What the failed request allocated is freed and given back to the driver.
                self.assertEqual(self.torch.cuda.free, [(2048 - 100) * MIB])
        self.assertEqual(self.invoke(app, "a", b"[[1]]")[0], 200)

    def test_gpu_budget(self):
        app = self.app([8192], {"MCE_MODEL_GPU_MEMORY_MB": "1024"})
        b = self.model("b", 600)
        self.assertEqual(self.load(app, "a", self.model("a", 600))[0], 200)
        code, _, body = self.load(app, "b", b)
        self.assertEqual(code, 507, body)
        self.assertIn("over its budget", error_of(body)[2])
        self.assertEqual(self.torch.cuda.allocated, [600 * MIB])  # b's weights were let go
        self.assertEqual(call(app, "DELETE", "/models/a")[0], 200)
        self.assertEqual(self.load(app, "b", b)[0], 200)


class DeviceChoiceTest(unittest.TestCase):
    def test_workers_round_robin(self):
        with mock.patch.dict(sys.modules, {"torch": fake_torch([100, 100, 100])}):
            self.assertEqual([gpu.for_worker(i) for i in range(7)], [0, 1, 2, 0, 1, 2, 0])
        with mock.patch.dict(sys.modules, {"torch": fake_torch([])}):
            self.assertIsNone(gpu.for_worker(3))

    def test_is_oom(self):
        t = fake_torch([1])
        with mock.patch.dict(sys.modules, {"torch": t}):
            self.assertTrue(gpu.is_oom(t.OutOfMemoryError("x")))
            wrapped = ValueError("wrapped")
            wrapped.__cause__ = t.OutOfMemoryError("x")
            self.assertTrue(gpu.is_oom(wrapped))
            self.assertTrue(gpu.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")))
            self.assertFalse(gpu.is_oom(RuntimeError("shape mismatch")))
            self.assertFalse(gpu.is_oom(MemoryError()))

    def test_single_model_worker_loads_on_its_device(self):
        t = fake_torch([100, 100])
        with ModelDir({"code/inference.py": """
                def model_fn(model_dir, context):
                    return context.system_properties["gpu_id"]
                def predict_fn(data, model, context):
                    return [model, context.system_properties["gpu_id"]]
                """}) as d, mock.patch.dict(sys.modules, {"torch": t}), \
                mock.patch.object(SingleModelApp, "start_watchdog"):
            s = Settings({"MCE_MODEL_DIR": d, "SAGEMAKER_SUBMIT_DIRECTORY": os.path.join(d, "code")})
            with mock.patch.object(server._Worker, "index", 3):
                app = server.single_worker_factory(s)()
            sys.modules.pop("inference", None)
            sys.path.remove(os.path.join(d, "code"))
        self.assertIn(("set_device", 1), t.cuda.calls)
        code, _, body = call(app, "POST", "/invocations", b"[1]", {"Content-Type": "application/json"})
        self.assertEqual((code, json.loads(body)), (200, [1, 1]))


class ReadBodyTest(unittest.TestCase):
    def test_stops_at_content_length(self):
        # werkzeug hands over the connection's stream: what follows the body is the next request.
        env = {"CONTENT_LENGTH": "5", "wsgi.input": io.BytesIO(b"[1,2]GET /ping HTTP/1.1\r\n")}
        self.assertEqual(read_body(env, 100), b"[1,2]")


@unittest.skipIf(real_torch is None, "torch is not installed in this image")
class DefaultHooksDeviceTest(unittest.TestCase):
    """The default PyTorch hooks on a device, with Debian's CPU torch: the moves are recorded, not made."""

    def save_linear(self, path):
        lin = real_torch.nn.Linear(2, 1)
        with real_torch.no_grad():
            lin.weight.copy_(real_torch.tensor([[2.0, -1.0]]))
            lin.bias.fill_(0.5)
        real_torch.jit.save(real_torch.jit.script(lin), path)

    def test_model_and_input_go_to_the_context_device(self):
        moves = []

        def module_to(self, *args, **kwargs):
            moves.append(("model", str(args[0])))
            return self

        def tensor_to(self, *args, **kwargs):
            moves.append(("input", str(args[0])))
            return self

        with ModelDir() as d, mock.patch.object(real_torch.nn.Module, "to", module_to), \
                mock.patch.object(real_torch.Tensor, "to", tensor_to):
            self.save_linear(os.path.join(d, "model.pt"))
            h = Handler(None, d, "pytorch")
            h.load(gpu_id=1)
            body, _, _ = h.invoke(b"[[1, 1]]", "application/json", None)
        self.assertEqual(json.loads(body), [[1.5]])
        # The model once, the input by input_fn (and again by predict_fn: the stand-in `to` leaves it on the CPU).
        self.assertEqual(moves[:2], [("model", "cuda:1"), ("input", "cuda:1")])
        self.assertEqual(set(moves[2:]), {("input", "cuda:1")} if moves[2:] else set())

    def test_predict_moves_the_input_to_the_context_device(self):
        # A user's input_fn left its tensor on the CPU; the default predict_fn hands the model its input on the
        # context's device (where the default model_fn put the model), and never asks the model for its
        # parameters (see frameworks.py: with a TorchScript model that can crash Debian's torch).
        class Moved:
            def __init__(self, t, device):
                self.t, self.device = t, device

        class OnGPU:
            def parameters(self):
                raise AssertionError("the default predict_fn read the model's parameters")

            def __call__(self, x):
                assert isinstance(x, Moved) and str(x.device) == "cuda:0", "input on %s" % getattr(x, "device", x)
                return x.t * 2

        user = types.SimpleNamespace(model_fn=lambda d: OnGPU(), input_fn=lambda data, ct: real_torch.tensor(
            json.loads(data)))
        with mock.patch.object(real_torch.Tensor, "to", lambda self, device, *a, **k: Moved(self, device)):
            h = Handler(user, "/m", "pytorch")
            h.load(gpu_id=0)
            body, _, _ = h.invoke(b"[[1, 2]]", "application/json", None)
        self.assertEqual(json.loads(body), [[2, 4]])

    def test_cpu_predict_leaves_the_input_alone(self):
        class CPUModel:
            def parameters(self):
                raise AssertionError("the default predict_fn read the model's parameters")

            def __call__(self, x):
                return x * 2

        with mock.patch.object(real_torch.Tensor, "to", side_effect=AssertionError("moved on the CPU")):
            h = Handler(types.SimpleNamespace(model_fn=lambda d: CPUModel()), "/m", "pytorch")
            h.load()
            body, _, _ = h.invoke(b"[[1, 2]]", "application/json", None)
        self.assertEqual(json.loads(body), [[2.0, 4.0]])


if __name__ == "__main__":
    unittest.main()
