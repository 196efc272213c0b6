// Package classifier is the inference container of the example chain: it labels feature vectors with a
// multinomial logistic regression (package logreg).
//
// Model directory: model.json (logreg format). Input: text/csv (one row of numbers per instance) or
// application/json ({"instances": [[…], …]} or a bare array of rows). A row whose width differs from the
// model's feature count is a 400. Output: application/json (the default)
// {"predictions": [{"label": "…", "probabilities": {"billing": 0.8, …}}, …]} or text/csv (one label per line).
package classifier
