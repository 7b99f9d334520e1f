package testkit

// T is what a checking helper needs of its caller: a test's t, or the
// *assert.CollectT that require.EventuallyWithT hands its condition. A
// helper that takes a T, and requires on it, can run inside that condition:
// a failure there ends the condition's goroutine and is retried, where on
// the test's t it would end the wrong goroutine (testing's FailNow is a
// runtime.Goexit) and leave Eventually to wait out its timeout.
// internal/architecture's TestNoTestIsStoppedFromAnotherGoroutine holds the
// rule.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}
