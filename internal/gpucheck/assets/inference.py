"""A generated model for the GPU check: its weights are one tensor of the size model.json names,
made at load time on the GPU (the CPU in a dry run) rather than read from disk, so that 40 models of
3 GiB need no 120 GB of files. A CUDA out-of-memory error propagates, as a real model's would."""

import json
import os

import torch


def model_fn(model_dir):
    with open(os.path.join(model_dir, "model.json")) as f:
        cfg = json.load(f)
    device = torch.device(cfg.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
    weights = torch.full((int(cfg["bytes"]),), int(cfg["seed"]) % 251, dtype=torch.uint8, device=device)
    return weights


def predict_fn(data, model):
    # Touches the weights on their device, so a call costs a kernel and a copy back.
    return [float(model[:4096].float().sum().item()) + float(data.float().sum().item())]
