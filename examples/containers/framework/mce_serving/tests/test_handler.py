import json
import types
import unittest

import numpy as np

from mce_serving.errors import InferenceError, ModelLoadError
from mce_serving.handler import Handler, UserCodeError, takes_context


def module(**fns):
    m = types.ModuleType("user")
    for k, v in fns.items():
        setattr(m, k, v)
    return m


class Doubler:
    """A stand-in sklearn model: predict doubles the row sums."""

    def predict(self, x):
        return np.asarray(x).sum(axis=1) * 2


class ArityTest(unittest.TestCase):
    def test_takes_context(self):
        self.assertFalse(takes_context(lambda a, b: 0, 2))
        self.assertTrue(takes_context(lambda a, b, c: 0, 2))
        self.assertTrue(takes_context(lambda a, b, c=None: 0, 2))
        self.assertTrue(takes_context(lambda *a: 0, 2))
        self.assertFalse(takes_context(lambda a, b, *, c=None: 0, 2))


class HandlerTest(unittest.TestCase):
    def test_sklearn_defaults(self):
        h = Handler(module(model_fn=lambda d: Doubler()), "/m", "sklearn")
        h.load()
        body, ct, _ = h.invoke(b"[1, 2]", "application/json", None)  # a 1-D array is one row
        self.assertEqual((json.loads(body), ct), ([6.0], "application/json"))
        body, ct, _ = h.invoke(b"1,2\n3,4", "text/csv", "image/png, text/csv")
        self.assertEqual((body, ct), (b"6.0\n14.0\n", "text/csv"))

    def test_missing_content_type_is_json(self):
        h = Handler(module(model_fn=lambda d: Doubler()), "/m", "sklearn")
        h.load()
        self.assertEqual(json.loads(h.invoke(b"[[1, 1]]", None, None)[0]), [4.0])

    def test_default_accept(self):
        h = Handler(module(model_fn=lambda d: Doubler()), "/m", "sklearn", default_accept="text/csv")
        h.load()
        self.assertEqual(h.invoke(b"[[1, 1]]", "application/json", "*/*")[:2], (b"4.0\n", "text/csv"))

    def test_no_default_model_fn_for_sklearn(self):
        h = Handler(module(), "/m", "sklearn")
        with self.assertRaisesRegex(ModelLoadError, "no default model_fn"):
            h.load()

    def test_transform_fn_is_exclusive(self):
        with self.assertRaisesRegex(ModelLoadError, "transform_fn and input_fn, output_fn"):
            Handler(module(model_fn=lambda d: 1, transform_fn=lambda *a: b"", input_fn=lambda *a: 1,
                           output_fn=lambda *a: 1), "/m")

    def test_transform_fn_with_context(self):
        seen = {}

        def transform_fn(model, data, content_type, accept, context):
            seen["args"] = (model, data, content_type, accept, context.custom_attributes, context.model_dir)
            return "ok:" + data, "text/plain"

        h = Handler(module(model_fn=lambda d: "M", transform_fn=transform_fn), "/m")
        h.load()
        body, ct, _ = h.invoke(b"a,b", "text/csv; charset=utf-8", "",
                               {"X-Amzn-SageMaker-Custom-Attributes": "trace=7"})
        self.assertEqual((body, ct), (b"ok:a,b", "text/plain"))
        self.assertEqual(seen["args"], ("M", "a,b", "text/csv", "application/json", "trace=7", "/m"))

    def test_context_only_where_arity_allows(self):
        calls = []

        def model_fn(model_dir, context):
            calls.append(("model_fn", context.system_properties["model_dir"]))
            return Doubler()

        def input_fn(data, content_type):
            calls.append(("input_fn", type(data).__name__))
            return np.array([[1.0, 2.0]])

        def predict_fn(data, model, context):
            calls.append(("predict_fn", context.get_request_header(0, "x-amzn-sagemaker-custom-attributes")))
            return model.predict(data)

        def output_fn(prediction, accept, context):
            context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "seen")
            return json.dumps(prediction.tolist())

        h = Handler(module(model_fn=model_fn, input_fn=input_fn, predict_fn=predict_fn, output_fn=output_fn), "/m")
        h.load()
        body, ct, ctx = h.invoke(b"[]", "application/json", "application/json",
                                 {"X-Amzn-SageMaker-Custom-Attributes": "a=b"})
        self.assertEqual((body, ct), (b"[6.0]", "application/json"))
        self.assertEqual(ctx.response_headers, {"X-Amzn-SageMaker-Custom-Attributes": "seen"})
        self.assertEqual(calls, [("model_fn", "/m"), ("input_fn", "str"), ("predict_fn", "a=b")])

    def test_binary_bodies_stay_bytes(self):
        got = {}

        def transform_fn(model, data, content_type, accept):
            got["t"] = type(data)
            return b"x"

        h = Handler(module(model_fn=lambda d: 1, transform_fn=transform_fn), "/m")
        h.load()
        h.invoke(b"\x00\x01", "application/x-npy", None)
        self.assertIs(got["t"], bytes)

    def test_user_errors_keep_their_cause(self):
        class Teapot(Exception):
            status_code = 418

        def predict_fn(data, model):
            raise Teapot("short and stout")

        h = Handler(module(model_fn=lambda d: Doubler(), predict_fn=predict_fn), "/m")
        h.load()
        with self.assertRaises(UserCodeError) as cm:
            h.invoke(b"[1]", "application/json", None)
        self.assertIsInstance(cm.exception.__cause__, Teapot)

    def test_wrong_shape_with_defaults_is_400(self):
        class Strict:
            def predict(self, x):
                raise ValueError("X has 3 features, but the model expects 2")

        h = Handler(module(model_fn=lambda d: Strict()), "/m")
        h.load()
        with self.assertRaises(InferenceError) as cm:
            h.invoke(b"[1, 2, 3]", "application/json", None)
        self.assertEqual(cm.exception.status_code, 400)

    def test_invalid_utf8_is_400(self):
        h = Handler(module(model_fn=lambda d: Doubler()), "/m")
        h.load()
        with self.assertRaises(InferenceError) as cm:
            h.invoke(b"\xff\xfe", "text/csv", None)
        self.assertEqual(cm.exception.status_code, 400)


if __name__ == "__main__":
    unittest.main()
