#!/usr/bin/env python3
"""The SageMaker Python SDK v3 against mce: ModelBuilder build -> deploy -> invoke -> delete, then the same model
through sagemaker-core's resources (Model, EndpointConfig, Endpoint), with only endpoint URLs changed.

It trains a small scikit-learn model here, writes a SageMaker inference script for it (model_fn, input_fn,
predict_fn, output_fn), uploads model.tar.gz to S3 (mce's --s3-endpoint, e.g. versitygw), serves it in mce's
scikit-learn framework image and checks that the endpoint's predictions are the local model's.

    pip install sagemaker scikit-learn joblib          # SDK 3.x
    export AWS_ENDPOINT_URL=http://127.0.0.1:8080      # SageMaker, the runtime, STS, IAM, CloudWatch Logs: mce
    export AWS_ENDPOINT_URL_S3=http://127.0.0.1:7072   # S3: your S3 server
    python3 examples/sdk-v3/deploy_v3.py --bucket sagemaker-v3-models --role-arn arn:aws:iam::123456789012:role/mce-local

Without --role-arn, ModelBuilder resolves the role from the caller's identity (STS GetCallerIdentity, IAM GetRole,
SimulatePrincipalPolicy, GetRole for the trust policy), which mce answers (docs/identity.md).
"""

import argparse
import json
import os
import tarfile
import tempfile
import time

INFERENCE = '''\
import json
import os

import joblib
import numpy as np


def model_fn(model_dir, context=None):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def input_fn(body, content_type, context=None):
    if content_type != "application/json":
        raise ValueError("send application/json, not %s" % content_type)
    return np.asarray(json.loads(body)["instances"], dtype=float)


def predict_fn(x, model, context=None):
    return {"predictions": model.predict(x).tolist()}


def output_fn(prediction, accept, context=None):
    return json.dumps(prediction), "application/json"
'''

SAMPLE = [[0.1, 0.2, 0.3, 0.4], [2.0, 1.5, -1.0, 0.5], [-1.0, -2.0, 1.0, 0.0]]


def artifacts(workdir):
    """A logistic regression on synthetic data, model.tar.gz with code/inference.py, and its own predictions."""
    import joblib
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    x = rng.normal(size=(300, 4))
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] > 0).astype(int)
    model = LogisticRegression().fit(x, y)
    joblib.dump(model, os.path.join(workdir, "model.joblib"))
    with open(os.path.join(workdir, "inference.py"), "w") as f:
        f.write(INFERENCE)
    tarball = os.path.join(workdir, "model.tar.gz")
    with tarfile.open(tarball, "w:gz") as t:
        t.add(os.path.join(workdir, "model.joblib"), arcname="model.joblib")
        t.add(os.path.join(workdir, "inference.py"), arcname="code/inference.py")
    return tarball, model.predict(np.asarray(SAMPLE)).tolist()


def predictions(out):
    body = out.body
    if hasattr(body, "read"):
        body = body.read()
    return json.loads(body)["predictions"]


def step(what, fn, *a, **kw):
    t0 = time.monotonic()
    out = fn(*a, **kw)
    print("%-48s %6.2f s" % (what, time.monotonic() - t0), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bucket", required=True, help="an existing bucket of your S3 server")
    ap.add_argument("--image", default="mce-framework/sklearn:latest")
    ap.add_argument("--role-arn", help="execution role (default: resolved from the caller's identity)")
    ap.add_argument("--instance-type", default="ml.m5.large")
    a = ap.parse_args()

    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant
    from sagemaker.serve.model_builder import ModelBuilder

    work = tempfile.mkdtemp()
    tarball, want = artifacts(work)
    session = Session(default_bucket=a.bucket)
    stamp = time.strftime("%H%M%S")
    data = step("upload model.tar.gz", session.upload_data, tarball, bucket=a.bucket, key_prefix="sdk-v3/" + stamp)
    env = {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}
    request = json.dumps({"instances": SAMPLE})

    # 1. ModelBuilder: build (CreateModel), deploy (endpoint configuration, endpoint, waits), invoke, delete.
    kw = dict(s3_model_data_url=data, image_uri=a.image, env_vars=env, instance_type=a.instance_type,
              sagemaker_session=session)
    if a.role_arn:
        kw["role_arn"] = a.role_arn
    builder = step("ModelBuilder(...)", ModelBuilder, **kw)
    print("  role:", builder.role_arn)
    step("ModelBuilder.build()", builder.build, model_name="v3-builder-" + stamp)
    endpoint = step("ModelBuilder.deploy(wait=True)", builder.deploy, endpoint_name="v3-builder-" + stamp,
                    initial_instance_count=1, instance_type=a.instance_type, wait=True)
    got = predictions(step("invoke", endpoint.invoke, body=request, content_type="application/json",
                           accept="application/json"))
    print("  predictions:", got, "(the local model's:", want, ")")
    assert got == want, "the endpoint's predictions are not the model's"
    config_name = endpoint.endpoint_config_name
    step("Endpoint.delete", endpoint.delete)
    step("Endpoint.wait_for_delete", endpoint.wait_for_delete, poll=2)
    step("EndpointConfig.delete", EndpointConfig.get(endpoint_config_name=config_name).delete)
    step("Model.delete", Model.get(model_name="v3-builder-" + stamp).delete)

    # 2. sagemaker-core's resources, one call each.
    role = builder.role_arn
    model = step("Model.create", Model.create, model_name="v3-core-" + stamp, execution_role_arn=role,
                 primary_container=ContainerDefinition(image=a.image, model_data_url=data, environment=env))
    config = step("EndpointConfig.create", EndpointConfig.create, endpoint_config_name="v3-core-" + stamp,
                  production_variants=[ProductionVariant(variant_name="AllTraffic", model_name=model.model_name,
                                                         initial_instance_count=1, instance_type=a.instance_type)])
    endpoint = step("Endpoint.create", Endpoint.create, endpoint_name="v3-core-" + stamp,
                    endpoint_config_name=config.endpoint_config_name)
    step("Endpoint.wait_for_status(InService)", endpoint.wait_for_status, "InService", poll=2)
    got = predictions(step("Endpoint.invoke", endpoint.invoke, body=request, content_type="application/json",
                           accept="application/json"))
    assert got == want, "the endpoint's predictions are not the model's"
    step("Endpoint.delete", endpoint.delete)
    step("Endpoint.wait_for_delete", endpoint.wait_for_delete, poll=2)
    step("EndpointConfig.delete", config.delete)
    step("Model.delete", model.delete)
    print("OK: both flows served the model's own predictions")


if __name__ == "__main__":
    main()
