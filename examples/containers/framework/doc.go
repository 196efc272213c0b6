// Package framework holds the sources of mce's framework images, mce-framework/sklearn and
// mce-framework/pytorch: the mce_serving toolkit (Python, run on Debian's scikit-learn and PyTorch)
// that serves users' unmodified SageMaker inference scripts, and one Dockerfile per image. The images
// are built by scripts/framework-images.sh (make framework-images).
//
// The Go files here are the integration tests: they start the real images with a corpus of user
// scripts (testdata/scripts) and models generated at test time with known parameters, and compare
// every answer with values computed in Go. They also run the toolkit's Python unit tests inside both
// images. The package has no other Go code.
package framework
