// Package featurizer is the preprocessing container of the example chain: it turns documents into the
// bag-of-words vectors (package textfeat) that the classifier container takes.
//
// Model directory: vocab.txt, one token per line. Input: text/plain (one document per line) or
// application/json ({"instances": ["text", …]} or ["text", …]). Output: text/csv (one row per document,
// the default) or application/json ({"instances": [[…], …]}).
package featurizer
