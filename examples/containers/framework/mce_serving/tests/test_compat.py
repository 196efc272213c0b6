"""The sagemaker_inference compatibility names scripts import."""

import json
import unittest

import numpy as np

from sagemaker_inference import content_types, decoder, encoder, errors

from mce_serving.errors import status_of


class CompatTest(unittest.TestCase):
    def test_round_trip(self):
        arr = decoder.decode("1,2\n3,4", content_types.CSV)
        self.assertEqual(arr.shape, (2, 2))
        self.assertEqual(json.loads(encoder.encode(np.asarray(arr) * 2, content_types.JSON)), [[2, 4], [6, 8]])
        self.assertIn(content_types.JSON, content_types.UTF8_TYPES)

    def test_errors_set_the_status(self):
        self.assertEqual(status_of(errors.GenericInferenceToolkitError(422, "no")), 422)
        self.assertEqual(status_of(errors.BaseInferenceToolkitError(400, "bad", "BadRequest")), 400)
        self.assertEqual(status_of(errors.UnsupportedFormatError("text/html")), 415)


if __name__ == "__main__":
    unittest.main()
