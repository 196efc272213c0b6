"""The PyTorch defaults; skipped in the scikit-learn image, which has no torch."""

import json
import os
import unittest

try:
    import torch
except ImportError:
    torch = None

from mce_serving.errors import ModelLoadError
from mce_serving.handler import Handler

from .helpers import ModelDir


@unittest.skipIf(torch is None, "torch is not installed in this image")
class PyTorchDefaultsTest(unittest.TestCase):
    def save_linear(self, path, script=True):
        lin = torch.nn.Linear(2, 1)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([[2.0, -1.0]]))
            lin.bias.fill_(0.5)
        if script:
            torch.jit.save(torch.jit.script(lin), path)
        else:
            torch.save(lin.state_dict(), path)

    def test_default_hooks(self):
        with ModelDir() as d:
            self.save_linear(os.path.join(d, "weights.pth"))  # the only *.pth is taken
            h = Handler(None, d, "pytorch")
            h.load()
            self.assertFalse(h.model.training)
            body, ct, _ = h.invoke(b"[[1, 1], [3, 2]]", "application/json", None)
            self.assertEqual((json.loads(body), ct), ([[1.5], [4.5]], "application/json"))
            body, ct, _ = h.invoke(b"1,1\n", "text/csv", "text/csv")
            self.assertEqual(body, b"1.5\n")

    def test_no_grad_in_default_predict(self):
        seen = {}

        class Probe(torch.nn.Module):
            def forward(self, x):
                seen["grad"] = torch.is_grad_enabled()
                return x

        h = Handler(type("m", (), {"model_fn": staticmethod(lambda d: Probe())}), "/m", "pytorch")
        h.load()
        h.invoke(b"[1.0]", "application/json", None)
        self.assertEqual(seen["grad"], False)

    def test_model_file_errors(self):
        with ModelDir() as d:
            with self.assertRaisesRegex(ModelLoadError, "no model.pt"):
                Handler(None, d, "pytorch").load()
            self.save_linear(os.path.join(d, "a.pt"))
            self.save_linear(os.path.join(d, "b.pt"))
            with self.assertRaisesRegex(ModelLoadError, "several candidates"):
                Handler(None, d, "pytorch").load()
            self.save_linear(os.path.join(d, "model.pt"), script=False)
            with self.assertRaisesRegex(ModelLoadError, "not a TorchScript model"):
                Handler(None, d, "pytorch").load()


if __name__ == "__main__":
    unittest.main()
