package testkit

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// OneConnection is an HTTP client (h2c, or HTTP/1.1) that sends every
// request on one connection, opened by the first: a request after the
// server closed it fails instead of going out on a new one, and Err says
// whether the connection can still carry requests. It is how a test shows
// that a server kept a connection open (through a panic, a reset stream).
// Counting a pooled client's dials cannot show it: the pool may dial again
// for reasons of its own, as when a second request comes before the dial
// that served the first has put its connection in the pool.
func OneConnection(t *testing.T, h2c bool) (*http.Client, *SingleConn) {
	t.Helper()
	c := &SingleConn{tr: &http.Transport{}}
	if h2c {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		c.tr.Protocols = &protocols
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cc != nil {
			_ = c.cc.Close()
		}
	})
	return &http.Client{Transport: c, Timeout: 30 * time.Second}, c
}

// SingleConn is OneConnection's transport.
type SingleConn struct {
	tr *http.Transport
	mu sync.Mutex
	cc *http.ClientConn
}

// RoundTrip sends req on the one connection, opening it the first time.
func (c *SingleConn) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.cc == nil {
		cc, err := c.tr.NewClientConn(req.Context(), req.URL.Scheme, req.URL.Host)
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.cc = cc
	}
	cc := c.cc
	c.mu.Unlock()
	return cc.RoundTrip(req)
}

// Err is nil while the one connection can carry requests.
func (c *SingleConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc == nil {
		return errors.New("testkit: no connection was opened")
	}
	return c.cc.Err()
}
