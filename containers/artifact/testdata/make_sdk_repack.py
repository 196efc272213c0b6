"""Writes sdk-repack.tar.gz as the SageMaker Python SDK's utils.repack_model
does: the model folder (with code/inference.py beside the weights) added with
tarfile.add(model_dir, arcname=os.path.sep), so that the first entry is the
directory "/" and the others are relative ("code/", "code/inference.py").

Run from this folder: python3 make_sdk_repack.py
"""
import os
import tarfile
import tempfile

with tempfile.TemporaryDirectory() as tmp:
    model_dir = os.path.join(tmp, "model")
    os.makedirs(os.path.join(model_dir, "code"))
    with open(os.path.join(model_dir, "model.pth"), "w") as f:
        f.write("weights\n")
    with open(os.path.join(model_dir, "code", "inference.py"), "w") as f:
        f.write("def model_fn(model_dir):\n    return None\n")
    with tarfile.open("sdk-repack.tar.gz", mode="w:gz") as t:
        t.add(model_dir, arcname=os.path.sep)
