"""Locust users that call a SageMaker endpoint through boto3, for the side-by-side with `mce loadtest`.

This is the pattern of SageMaker's multi-model load-testing guidance (a Locust User that owns a boto3
sagemaker-runtime client, times each invoke_endpoint call and reports it as a Locust request event):
https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html and
https://docs.locust.io/en/stable/testing-other-systems.html. scripts/bench-loadtest.sh runs it headless.

Environment:
  LOCUST_ENDPOINT_NAME   endpoint to call (required)
  LOCUST_PAYLOAD         file whose bytes are every call's body (required)
  LOCUST_CONTENT_TYPE    ContentType (default application/octet-stream)
  LOCUST_TARGET_CONTAINER  TargetContainerHostname (optional)
  LOCUST_CUSTOM_ATTRIBUTES CustomAttributes (optional)
  LOCUST_MODELS, LOCUST_MODEL_PATTERN  N and a pattern like model-{i:03}.tar.gz: TargetModel picked uniformly
                         from models 0..N-1 (optional)
  AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  as usual; --host is the endpoint URL (mce), or empty
                         for SageMaker itself.

Like `mce loadtest`, each call is made once (no retries) and users do not think between calls.
"""

import os
import random
import time

import boto3
from botocore.config import Config
from locust import User, constant, events, task

ENDPOINT = os.environ["LOCUST_ENDPOINT_NAME"]
with open(os.environ["LOCUST_PAYLOAD"], "rb") as f:
    BODY = f.read()
CONTENT_TYPE = os.environ.get("LOCUST_CONTENT_TYPE", "application/octet-stream")
TARGET_CONTAINER = os.environ.get("LOCUST_TARGET_CONTAINER", "")
CUSTOM_ATTRIBUTES = os.environ.get("LOCUST_CUSTOM_ATTRIBUTES", "")
MODELS = int(os.environ.get("LOCUST_MODELS", "0"))
PATTERN = os.environ.get("LOCUST_MODEL_PATTERN", "model-{i}.tar.gz")

_client = None


@events.init.add_listener
def _make_client(environment, **_kwargs):
    # One client for all users of this process, with a connection per user: boto3 clients are thread safe,
    # and under Locust's gevent the pool's connections are shared by the greenlets.
    global _client
    users = environment.parsed_options.num_users if environment.parsed_options else 1
    _client = boto3.client(
        "sagemaker-runtime",
        endpoint_url=environment.host or None,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=max(10, users or 1),
                      read_timeout=60, connect_timeout=10),
    )


class SageMakerUser(User):
    wait_time = constant(0)

    @task
    def invoke(self):
        args = {"EndpointName": ENDPOINT, "ContentType": CONTENT_TYPE, "Body": BODY}
        if TARGET_CONTAINER:
            args["TargetContainerHostname"] = TARGET_CONTAINER
        if CUSTOM_ATTRIBUTES:
            args["CustomAttributes"] = CUSTOM_ATTRIBUTES
        name = "InvokeEndpoint"
        if MODELS > 0:
            args["TargetModel"] = PATTERN.replace("{i:03}", "%03d").replace("{i}", "%d") % random.randrange(MODELS)
        start = time.perf_counter()
        length, exc = 0, None
        try:
            r = _client.invoke_endpoint(**args)
            length = len(r["Body"].read())
        except Exception as e:  # every failure is counted, as mce loadtest counts it
            exc = e
        self.environment.events.request.fire(
            request_type="boto3", name=name, response_time=(time.perf_counter() - start) * 1000,
            response_length=length, exception=exc, context={})
