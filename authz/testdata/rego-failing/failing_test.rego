package mce.custom.failing_test

test_passes if true

test_fails if {
	1 == 2
}
