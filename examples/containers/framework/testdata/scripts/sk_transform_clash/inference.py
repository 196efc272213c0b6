# Wrong on purpose: transform_fn cannot be combined with input_fn.
def model_fn(model_dir):
    return None


def input_fn(request_body, content_type):
    return request_body


def transform_fn(model, request_body, content_type, accept):
    return request_body
