package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2conn is a lean HTTP/2 client connection over cleartext TCP (prior
// knowledge), the load generator's. The frames are golang.org/x/net/http2's
// Framer and the header blocks its hpack; what is ours is the shape: a
// request is written whole (HEADERS, DATA) by the calling goroutine, the
// responses are read by one reader goroutine and handed over on a channel.
// No goroutine, no header map and no request object per request —
// net/http's client cost as much CPU per request as the empty server it
// measured.
//
// It speaks what a unary gRPC call needs: no server push, no priorities,
// responses read whole. It honours the server's SETTINGS (waiting for the
// first before the first request): MAX_CONCURRENT_STREAMS (a request waits
// for a free stream), INITIAL_WINDOW_SIZE and MAX_FRAME_SIZE (request
// bodies are sent within the connection's and the stream's send windows,
// in frames no larger than the server reads, resumed by WINDOW_UPDATE) and
// HEADER_TABLE_SIZE (the encoder's dynamic table). A request that times
// out is reset (RST_STREAM CANCEL), so the server stops working on it. Our
// receive windows are opened wide: the connection's is topped up, a
// stream's is never exhausted by a unary response. Headers are encoded by
// the connection's encoder as the request leaves, but for the call's
// never-indexed literals, encoded before the clock starts (Header).
type h2conn struct {
	conn      net.Conn
	authority string

	// wmu guards the writing side — bw, the Framer's writes, the encoder
	// and its buffer — and what shapes it: the server's settings, the send
	// windows and the streams open. cond (on wmu) wakes writers waiting
	// for a stream or a window.
	wmu  sync.Mutex
	cond *sync.Cond
	// writers counts the goroutines writing or queued for wmu: the last
	// one out flushes, so under load several requests leave in one write.
	writers    atomic.Int32
	bw         *bufio.Writer
	fr         *http2.Framer
	enc        *hpack.Encoder
	hbuf       bytes.Buffer
	nextID     uint32
	open       int   // streams open
	maxStreams int   // SETTINGS_MAX_CONCURRENT_STREAMS
	initWindow int64 // SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window
	connWindow int64 // the connection's send window
	maxFrame   int   // SETTINGS_MAX_FRAME_SIZE

	// smu guards the streams awaiting their response and the
	// connection's end.
	smu     sync.Mutex
	streams map[uint32]*h2stream
	dead    error
	gone    chan struct{} // closed when the connection has failed

	// The reader's own: the response header decoder, the stream whose
	// header block it decodes, DATA received since the last connection
	// WINDOW_UPDATE, and the server's first SETTINGS.
	dec      *hpack.Decoder
	cur      *h2stream
	curEnd   bool
	consumed int
	settings chan struct{}
}

// h2stream is one request waiting for its response.
type h2stream struct {
	id         uint32
	done       chan struct{}
	status     string
	grpcStatus string
	grpcMsg    string
	data       int
	err        error
	// window is the stream's send window (under wmu).
	window int64
	// ended: answered or reset by the server (set by finish); waiting:
	// its writer waits for a window, and must be woken when it ends.
	ended, waiting atomic.Bool
}

const (
	// Our receive windows: streams get this much (responses are small),
	// the connection is topped up to it.
	recvWindow = 1 << 30
	// The HTTP/2 defaults until the server's SETTINGS say otherwise.
	defaultWindow   = 65535
	defaultMaxFrame = 16384
)

var (
	errConnDead = errors.New("h2c: connection closed")
	errTimeout  = errors.New("timeout")
)

func dialH2C(addr string) (*h2conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &h2conn{
		conn: conn, authority: addr, bw: bufio.NewWriterSize(conn, 64<<10), nextID: 1,
		maxStreams: math.MaxInt, initWindow: defaultWindow, connWindow: defaultWindow, maxFrame: defaultMaxFrame,
		streams: map[uint32]*h2stream{}, gone: make(chan struct{}), settings: make(chan struct{}),
	}
	c.cond = sync.NewCond(&c.wmu)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 64<<10))
	c.fr.SetReuseFrames() // each frame is done with before the next is read
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.dec = hpack.NewDecoder(4096, c.header)
	// Preface, our settings (no push; wide stream windows), and the
	// connection window opened to recvWindow.
	_, _ = c.bw.WriteString(http2.ClientPreface)
	_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow})
	_ = c.fr.WriteWindowUpdate(0, recvWindow-defaultWindow)
	if err := c.bw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	go c.readLoop()
	select {
	case <-c.settings:
		return c, nil
	case <-c.gone:
		return nil, fmt.Errorf("h2c %s: %w", addr, c.deadErr())
	case <-time.After(10 * time.Second):
		c.close()
		return nil, fmt.Errorf("h2c %s: no SETTINGS from the server", addr)
	}
}

// roundTrip sends a POST of body to path with the call's other headers
// (extra) and waits up to wait (on the caller's timer) for the whole
// response. It returns "" when the call succeeded (HTTP 200, grpc-status 0),
// else what went wrong.
func (c *h2conn) roundTrip(path string, extra Header, body []byte, timeout *time.Timer, wait time.Duration) string {
	st := c.exchange("POST", path, extra, body, timeout, wait)
	switch {
	case st.err != nil:
		return "transport: " + clipText(st.err.Error(), 80)
	case st.status != "200":
		return "http " + st.status
	case st.grpcStatus == "0":
		return ""
	default:
		msg := st.grpcMsg
		if m, err := url.PathUnescape(msg); err == nil { // grpc-message is percent-encoded
			msg = m
		}
		return "grpc " + st.grpcStatus + ": " + clipText(msg, 80)
	}
}

// get sends GET path and expects a 200.
func (c *h2conn) get(path string, timeout *time.Timer) error {
	st := c.exchange("GET", path, Header{}, nil, timeout, 10*time.Second)
	if st.err != nil {
		return st.err
	}
	if st.status != "200" {
		return fmt.Errorf("GET %s: HTTP %s", path, st.status)
	}
	return nil
}

// exchange sends one request (an empty body: none) and waits for its
// response, at most wait in all.
func (c *h2conn) exchange(method, path string, extra Header, body []byte, timeout *time.Timer, wait time.Duration) *h2stream {
	deadline := time.Now().Add(wait)
	st := &h2stream{done: make(chan struct{})}
	c.writers.Add(1)
	c.wmu.Lock()
	// A stream of the server's MAX_CONCURRENT_STREAMS.
	for c.open >= c.maxStreams && c.deadErr() == nil {
		if !c.waitLocked(deadline) {
			st.err = errTimeout
			c.unlockWriting()
			return st
		}
	}
	if err := c.deadErr(); err != nil {
		st.err = err
		c.unlockWriting()
		return st
	}
	st.id, st.window = c.nextID, c.initWindow
	c.nextID += 2
	c.open++
	c.smu.Lock()
	c.streams[st.id] = st
	c.smu.Unlock()

	c.hbuf.Reset()
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":method", Value: method})
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":path", Value: path})
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":authority", Value: c.authority})
	for _, f := range extra.Fields {
		_ = c.enc.WriteField(f)
	}
	c.hbuf.Write(extra.Literal)
	block := c.hbuf.Bytes()
	frag := block[:min(len(block), c.maxFrame)]
	werr := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: frag, EndStream: len(body) == 0, EndHeaders: len(frag) == len(block)})
	for rest := block[len(frag):]; len(rest) > 0 && werr == nil; rest = rest[len(frag):] {
		frag = rest[:min(len(rest), c.maxFrame)]
		werr = c.fr.WriteContinuation(st.id, len(frag) == len(rest), frag)
	}
	// The body, within both send windows, in frames the server reads.
	reset := false
	for off := 0; off < len(body) && werr == nil; {
		n := min(len(body)-off, c.maxFrame, int(min(c.connWindow, st.window)))
		if n > 0 {
			werr = c.fr.WriteData(st.id, off+n == len(body), body[off:off+n])
			c.connWindow -= int64(n)
			st.window -= int64(n)
			off += n
			continue
		}
		st.waiting.Store(true)
		if st.ended.Load() || c.deadErr() != nil {
			// Answered before it had all of the request: the rest is
			// not needed, and our half of the stream is closed with a
			// reset. Not when the server reset the stream (no reset
			// answers a reset) or the connection is gone.
			reset = st.ended.Load() && st.err == nil
			break
		}
		if !c.waitLocked(deadline) {
			reset = true
			break
		}
	}
	if reset && werr == nil {
		werr = c.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)
	}
	if ferr := c.unlockWriting(); werr == nil {
		werr = ferr
	}
	if werr != nil {
		c.fail(werr)
	}

	if d := time.Until(deadline); d > 0 {
		timeout.Reset(d)
	} else {
		timeout.Reset(0)
	}
	select {
	case <-st.done:
		timeout.Stop() // Go 1.23 timers: no stale tick is left to drain
		c.release(false, st.id)
		return st
	case <-timeout.C:
		c.smu.Lock()
		mine := c.streams[st.id] == st
		delete(c.streams, st.id)
		c.smu.Unlock()
		if !mine { // answered meanwhile
			<-st.done
			c.release(false, st.id)
			return st
		}
		// Tell the server to stop working on it.
		c.release(!reset, st.id)
		return &h2stream{err: errTimeout}
	}
}

// release gives the stream's place back (once the exchange is over: the
// server closed it too, or is told to by the RST_STREAM sent here).
func (c *h2conn) release(reset bool, id uint32) {
	c.writers.Add(1)
	c.wmu.Lock()
	var err error
	if reset && c.deadErr() == nil {
		err = c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	c.open--
	c.cond.Broadcast()
	if ferr := c.unlockWriting(); err == nil {
		err = ferr
	}
	if err != nil {
		c.fail(err)
	}
}

// unlockWriting ends a writer's turn: the last one flushes.
func (c *h2conn) unlockWriting() error {
	var err error
	if c.writers.Add(-1) == 0 {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	return err
}

// waitLocked waits (wmu held) for a change of the windows, the streams or
// the connection, at most until deadline; false when the deadline passed.
// What is buffered leaves first: the server may need it to open a window.
func (c *h2conn) waitLocked(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.AfterFunc(d, func() {
		c.wmu.Lock()
		c.cond.Broadcast()
		c.wmu.Unlock()
	})
	defer t.Stop()
	c.writers.Add(-1)
	if err := c.bw.Flush(); err != nil {
		c.writers.Add(1)
		// The connection is over: said now, cleaned up by fail (which
		// takes wmu) once this writer lets go of it.
		c.smu.Lock()
		if c.dead == nil {
			c.dead = err
		}
		c.smu.Unlock()
		go c.fail(err)
		return time.Now().Before(deadline)
	}
	c.cond.Wait()
	c.writers.Add(1)
	return time.Now().Before(deadline)
}

func (c *h2conn) deadErr() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.dead
}

// fail ends the connection: every waiting stream gets err.
func (c *h2conn) fail(err error) {
	c.smu.Lock()
	if c.dead == nil {
		c.dead = err
	}
	streams := c.streams
	c.streams = map[uint32]*h2stream{}
	select {
	case <-c.gone:
	default:
		close(c.gone)
	}
	c.smu.Unlock()
	for _, st := range streams {
		st.err = err
		close(st.done)
	}
	c.wmu.Lock()
	c.cond.Broadcast()
	c.wmu.Unlock()
	_ = c.conn.Close()
}

func (c *h2conn) close() { c.fail(errConnDead) }

func (c *h2conn) stream(id uint32) *h2stream {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.streams[id]
}

// finish completes a stream, unless fail or a timeout got to it first.
func (c *h2conn) finish(st *h2stream) {
	c.smu.Lock()
	mine := c.streams[st.id] == st
	if mine {
		delete(c.streams, st.id)
	}
	c.smu.Unlock()
	if !mine {
		return
	}
	st.ended.Store(true)
	close(st.done)
	if st.waiting.Load() {
		// Its writer waits for a window that will not open now.
		c.wmu.Lock()
		c.cond.Broadcast()
		c.wmu.Unlock()
	}
}

// header receives the decoded fields of a response header block.
func (c *h2conn) header(f hpack.HeaderField) {
	st := c.cur
	if st == nil {
		return
	}
	switch f.Name {
	case ":status":
		st.status = f.Value
	case "grpc-status":
		st.grpcStatus = f.Value
	case "grpc-message":
		st.grpcMsg = f.Value
	}
}

// write writes frames from the reader (wmu held by it) and flushes.
func (c *h2conn) write(frames func() error) error {
	c.writers.Add(1)
	c.wmu.Lock()
	err := frames()
	if ferr := c.unlockWriting(); err == nil {
		err = ferr
	}
	return err
}

func (c *h2conn) readLoop() {
	var once sync.Once
	for {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		id := frame.Header().StreamID
		switch f := frame.(type) {
		case *http2.DataFrame:
			c.consumed += int(f.Header().Length) // padding included
			if st := c.stream(id); st != nil {
				st.data += len(f.Data())
				if f.StreamEnded() {
					c.finish(st)
				}
			}
			if c.consumed >= 1<<20 {
				n := c.consumed
				c.consumed = 0
				err = c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(n)) })
			}
		case *http2.HeadersFrame:
			// Every block is decoded, wanted or not: the dynamic table
			// must follow the server's encoder.
			c.cur, c.curEnd = c.stream(id), f.StreamEnded()
			err = c.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded())
		case *http2.ContinuationFrame:
			err = c.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded())
		case *http2.RSTStreamFrame:
			if st := c.stream(id); st != nil {
				st.err = fmt.Errorf("stream reset: %v", f.ErrCode)
				c.finish(st)
			}
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			err = c.write(func() error {
				if err := f.ForeachSetting(c.applySetting); err != nil {
					return err
				}
				c.cond.Broadcast()
				return c.fr.WriteSettingsAck()
			})
			once.Do(func() { close(c.settings) })
		case *http2.PingFrame:
			if !f.IsAck() {
				err = c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.WindowUpdateFrame:
			c.wmu.Lock()
			if id == 0 {
				c.connWindow += int64(f.Increment)
			} else if st := c.stream(id); st != nil {
				st.window += int64(f.Increment)
			}
			if c.connWindow > math.MaxInt32 {
				err = http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			c.cond.Broadcast()
			c.wmu.Unlock()
		case *http2.GoAwayFrame:
			// No new streams; those the server will not process fail now,
			// the others are answered before it closes the connection.
			gone := fmt.Errorf("goaway %v: %s", f.ErrCode, f.DebugData())
			c.smu.Lock()
			if c.dead == nil {
				c.dead = gone
			}
			for sid, st := range c.streams {
				if sid > f.LastStreamID {
					delete(c.streams, sid)
					st.err = gone
					close(st.done)
				}
			}
			c.smu.Unlock()
			c.wmu.Lock()
			c.cond.Broadcast()
			c.wmu.Unlock()
		case *http2.PushPromiseFrame:
			err = http2.ConnectionError(http2.ErrCodeProtocol) // push is off
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// headerBlock decodes a fragment of a response header block; at its end
// the block's stream is answered when it ended the stream.
func (c *h2conn) headerBlock(frag []byte, end bool) error {
	if _, err := c.dec.Write(frag); err != nil {
		return err
	}
	if !end {
		return nil
	}
	if err := c.dec.Close(); err != nil {
		return err
	}
	if c.cur != nil && c.curEnd {
		c.finish(c.cur)
	}
	c.cur = nil
	return nil
}

// applySetting applies one of the server's settings (wmu held).
func (c *h2conn) applySetting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingMaxConcurrentStreams:
		c.maxStreams = int(s.Val)
	case http2.SettingInitialWindowSize:
		// The change applies to the windows of the open streams too.
		delta := int64(s.Val) - c.initWindow
		c.initWindow = int64(s.Val)
		c.smu.Lock()
		for _, st := range c.streams {
			st.window += delta
		}
		c.smu.Unlock()
	case http2.SettingMaxFrameSize:
		c.maxFrame = int(s.Val)
	case http2.SettingHeaderTableSize:
		c.enc.SetMaxDynamicTableSizeLimit(s.Val)
	}
	return nil
}
