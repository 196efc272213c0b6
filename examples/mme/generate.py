"""Generate the 200 PyTorch models of the multi-model example, each with its own TorchScript file
and its own inference script, and a manifest of expected answers.

Run at build time by scripts/framework-models.sh inside mce-framework-base/pytorch:bookworm:

    python3 examples/mme/generate.py OUTDIR [COUNT] [HIDDEN]

Writes OUTDIR/model-000.tar.gz ... (COUNT, default 200), each holding
  model.pt              a TorchScript MLP 64 -> HIDDEN -> HIDDEN -> 10 (default HIDDEN 768: about
                        650,000 float32 weights, 2.5 MiB, so that loaded models take real memory),
                        with weights drawn from its own seed (the model's number)
  code/inference.py     code/inference.py of this folder with MODEL_NAME set to the model's name,
                        so an answer shows which model's script produced it
and OUTDIR/manifest.json: for every model its TargetModel, a request (two 8x8 digit images from
scikit-learn's bundled digits, 64 values a row) and the answer computed here in-process.
"""
import io
import json
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "framework-models"))
import artifact  # noqa: E402


def network(seed, hidden):
    """A freshly initialised MLP whose weights depend only on seed."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10))
    return net.eval()


def main(out, count, hidden):
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    with open(os.path.join(HERE, "code", "inference.py")) as f:
        template = f.read()
    marker = 'MODEL_NAME = "model-template"'
    assert marker in template, "code/inference.py lost its MODEL_NAME line"
    # Inputs: digit images scaled to [0, 1] (pixel values run 0..16).
    images = load_digits().data / 16.0
    manifest = {"hidden": hidden, "models": []}
    for i in range(count):
        name = f"model-{i:03d}"
        net = network(i, hidden)
        rows = images[[(2 * i) % len(images), (2 * i + 1) % len(images)]]
        with torch.no_grad():
            probs = torch.softmax(net(torch.from_numpy(rows.astype(np.float32))), dim=1)
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(net), buf)
        script = template.replace(marker, f'MODEL_NAME = "{name}"')
        artifact.pack(os.path.join(out, name + ".tar.gz"),
                      {"model.pt": buf.getvalue(), "code/inference.py": script.encode()}, level=1)
        manifest["models"].append({
            "target_model": name + ".tar.gz",
            "request": rows.tolist(),
            "response": {"model": name, "predictions": probs.argmax(dim=1).tolist(),
                         "probabilities": probs.tolist()},
        })
    artifact.write_json(os.path.join(out, "manifest.json"), manifest)
    size = os.path.getsize(os.path.join(out, "model-000.tar.gz"))
    print(f"mme: {count} TorchScript MLPs 64-{hidden}-{hidden}-10 in {out} ({size / 2**20:.1f} MiB each)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/models/mme-torch",
         int(sys.argv[2]) if len(sys.argv) > 2 else 200,
         int(sys.argv[3]) if len(sys.argv) > 3 else 768)
