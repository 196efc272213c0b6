// Package textfeat owns the text features shared by the featurizer container and the classifier trainer:
// the tokeniser, the vocabulary file format (vocab.txt) and the bag-of-words vectoriser. Because the
// classifier is trained on exactly these features, both sides must use this package and nothing else.
package textfeat
