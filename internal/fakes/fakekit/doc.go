// Package fakekit is what the fake gateways of internal/fakes (epay,
// alipay, provider) share: the life of a fake's HTTP server and the
// goroutines it must wait for (Host), the asynchronous notify round of a
// payment gateway (Notifier), and a few value helpers (cents, forms).
//
// Everything a protocol decides stays in its fake: the parameters of a
// notify and how they are signed, the acknowledgement the merchant must
// answer, the retry schedule, the HTTP method and headers. fakekit only
// runs what the fake describes, so two fakes that share it still speak
// two independent protocols, and neither shares code with the plugin it
// is there to test.
//
// A notify round, one per Notifier.Start:
//
//	Start ──► wait schedule[0]·scale ──► attempt 1 ──acked──► done
//	                                       │ not acked (dropped,
//	                                       ▼ error, other answer)
//	          wait schedule[1]·scale ──► attempt 2 ──acked──► done
//	                                       │
//	                                      ...
//	          schedule exhausted ──► warning logged, done
//
//	Host.Close at any wait ──► the round ends, no further attempt
//
// A Host's life:
//
//	NewHost ──Start──► serving ──Close──► closed
//	   └──────────────Close──────────────────┘
//
// Close cancels the host's context (ending every wait), stops the
// listener, and waits for every handler and round it admitted; after it,
// Go and Guard refuse new work.
package fakekit
