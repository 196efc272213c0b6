// Package logreg owns the classifier's model: multinomial logistic regression, its model.json format,
// prediction (softmax) and deterministic full-batch gradient-descent training. It knows nothing of text;
// features come from package textfeat.
package logreg
