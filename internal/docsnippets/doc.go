// Package docsnippets runs the shell and Python snippets of the repository's
// READMEs and of the reference documents in docs/, exactly as written, from
// the repository root, so that they stay true. Its test is part of `make test`.
//
// Each fenced block whose language is sh, bash or python runs in order, per
// document, with bash -euo pipefail (or python3) in the repository root, in an
// environment without the caller's AWS credentials or profile: a snippet that
// needs credentials or a region must say so itself. Blocks of one document
// share its state (a state folder of their own, an mce its serve block
// started); blocks of different documents share nothing, so a document whose
// snippets call an endpoint starts mce with it itself. An HTML comment on the
// line before a fence (blank lines between are allowed) changes that:
//
//	<!-- snippet: skip REASON -->  the block is not run; REASON is required
//	                                (a GPU, minutes of building, an interactive
//	                                program).
//	<!-- snippet: serve -->         the block starts mce (bin/mce serve …, or
//	                                docker-compose up -d): it runs in the
//	                                background, the next block waits until
//	                                127.0.0.1:8080 lists every endpoint
//	                                InService, and it is stopped when the
//	                                document's blocks are done.
//
// The documents hard-code mce's default address 127.0.0.1:8080, and the test
// runs what the reader reads; when that port is taken, a document with a serve
// block is skipped with a message, and under CI (CI set) the test fails.
//
// MCE_SNIPPETS runs only some documents: comma-separated paths from the
// repository root or path.Match patterns, e.g.
//
//	MCE_SNIPPETS=docs/async.md,README.md go test -count=1 -run TestREADMESnippets ./internal/docsnippets/ -v
//
// TestRelativeLinks checks that every relative link of every Markdown file
// leads to a file of the repository, and its #anchor to a heading there.
package docsnippets
