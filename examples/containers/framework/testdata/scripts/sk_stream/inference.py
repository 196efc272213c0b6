# Streamed answers: predict_fn returns a generator of `n` pieces, `pause` seconds apart, that may fail
# before its first piece (status 422) or after `fail_after` pieces (the stream must break, not end).
import json
import time


class Refused(Exception):
    status_code = 422


def model_fn(model_dir):
    return None


def input_fn(body, content_type):
    return json.loads(body)


def predict_fn(req, model):
    def pieces():
        if req.get("refuse"):
            raise Refused("refused before the first piece")
        for i in range(req["n"]):
            if i == req.get("fail_after"):
                raise RuntimeError("failed after %d pieces" % i)
            if i:
                time.sleep(req["pause"])
            yield "piece %d\n" % i
    return pieces()


def output_fn(pieces, accept):
    return pieces, "text/plain"
