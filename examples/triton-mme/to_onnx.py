#!/usr/bin/env python3
"""Turn the generated modelserver artifacts into Triton model archives (ONNX, onnxruntime backend).

Usage: python3 examples/triton-mme/to_onnx.py [IN_DIR] [OUT_DIR]
       (defaults: build/mme-models build/triton-models; run scripts/mme-models.sh first)
Needs: pip install onnx numpy

For every IN_DIR/model-NNN.tar.gz (config.pbtxt + model.json, see examples/containers/modelserver/README.md)
it writes OUT_DIR/model-NNN.tar.gz holding one Triton model directory:

    model-NNN/config.pbtxt     backend "onnxruntime", INPUT0 FP32 [-1,4] -> OUTPUT0 FP32 [-1,3], on the GPU
    model-NNN/1/model.onnx     the same network: MatMul + Add (+ Relu / Softmax ...) per layer

SageMaker (and mce) extract it to /opt/ml/models/<hash>/model/; Triton's SageMaker front end finds the one model
directory inside and loads it under the TargetModel name. The answers match build/mme-models/manifest.json to
about 1e-6 (Triton accumulates in float32).
"""
import io
import json
import os
import sys
import tarfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softmax": "Softmax", "none": None}

CONFIG = """backend: "onnxruntime"
max_batch_size: 0
input [ {{ name: "{inp}", data_type: TYPE_FP32, dims: [ -1, {n_in} ] }} ]
output [ {{ name: "{out}", data_type: TYPE_FP32, dims: [ -1, {n_out} ] }} ]
instance_group [ {{ kind: KIND_GPU, count: 1 }} ]
"""


def to_onnx(spec):
    inp, out = spec["inputs"][0], spec["outputs"][0]
    if inp["datatype"] != "FP32" or len(inp["shape"]) != 2 or len(out["shape"]) != 2:
        raise ValueError("only FP32 models with shapes [-1, N] are converted")
    nodes, initializers, cur = [], [], inp["name"]
    last = len(spec["layers"]) - 1
    for i, layer in enumerate(spec["layers"]):
        w = np.array(layer["weights"], dtype=np.float32).T  # model.json has one row per output unit
        b = np.array(layer["bias"], dtype=np.float32)
        initializers += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"B{i}")]
        act = ACTIVATIONS[layer.get("activation") or "none"]
        z = out["name"] if i == last and act is None else f"z{i}"
        nodes.append(helper.make_node("MatMul", [cur, f"W{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"B{i}"], [z]))
        cur = z
        if act is not None:
            y = out["name"] if i == last else f"a{i}"
            attrs = {"axis": -1} if act == "Softmax" else {}
            nodes.append(helper.make_node(act, [cur], [y], **attrs))
            cur = y
    graph = helper.make_graph(
        nodes,
        "mce_dense",
        [helper.make_tensor_value_info(inp["name"], TensorProto.FLOAT, ["batch", inp["shape"][1]])],
        [helper.make_tensor_value_info(out["name"], TensorProto.FLOAT, ["batch", out["shape"][1]])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="mce")
    model.ir_version = 8  # readable by older onnxruntime releases too
    onnx.checker.check_model(model)
    return model.SerializeToString(), CONFIG.format(
        inp=inp["name"], out=out["name"], n_in=inp["shape"][1], n_out=out["shape"][1])


def add(tar, name, data=None):
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    else:
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "build/mme-models"
    dst = sys.argv[2] if len(sys.argv) > 2 else "build/triton-models"
    os.makedirs(dst, exist_ok=True)
    names = sorted(n for n in os.listdir(src) if n.endswith(".tar.gz"))
    if not names:
        sys.exit(f"to_onnx.py: no .tar.gz in {src} (run scripts/mme-models.sh)")
    for name in names:
        with tarfile.open(os.path.join(src, name)) as t:
            spec = json.load(t.extractfile("model.json"))
        onnx_bytes, config = to_onnx(spec)
        model = name[: -len(".tar.gz")]
        tmp = os.path.join(dst, "." + name + ".tmp")
        with tarfile.open(tmp, "w:gz", format=tarfile.USTAR_FORMAT) as t:
            add(t, model)
            add(t, f"{model}/config.pbtxt", config.encode())
            add(t, f"{model}/1")
            add(t, f"{model}/1/model.onnx", onnx_bytes)
        os.replace(tmp, os.path.join(dst, name))
    print(f"{dst}: {len(names)} Triton model archives ({names[0]} ... {names[-1]})")


if __name__ == "__main__":
    main()
