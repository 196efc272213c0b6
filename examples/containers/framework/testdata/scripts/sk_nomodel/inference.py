# Wrong on purpose: the scikit-learn container has no default model_fn.
def predict_fn(input_data, model):
    return model.predict(input_data)
