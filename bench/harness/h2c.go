package harness

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h2conn is a lean HTTP/2 client connection over cleartext TCP (prior
// knowledge), the load generator's: a request is one write of a HEADERS and
// a DATA frame from the calling goroutine, a response is parsed by the one
// reader goroutine and handed over on a channel. No goroutine, no header
// map and no request object per request — net/http's client cost as much
// CPU per request as the empty server it measured.
//
// It speaks what a unary gRPC call needs: no server push, no priorities,
// responses read whole. Flow control: the connection's receive window is
// opened wide and replenished; the send window (request bodies) is obeyed.
type h2conn struct {
	conn      net.Conn
	authority string

	wmu        sync.Mutex // writes, stream ids and the send window
	writers    atomic.Int32
	bw         *bufio.Writer
	nextID     uint32
	sendWindow int64
	windowCond *sync.Cond
	maxFrame   int

	smu     sync.Mutex
	streams map[uint32]*h2stream
	dead    error

	dec      *hpackDecoder
	consumed int // DATA bytes received since the last WINDOW_UPDATE
}

// h2stream is one request waiting for its response.
type h2stream struct {
	done       chan struct{}
	status     string
	grpcStatus string
	grpcMsg    string
	data       int
	err        error
}

const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	// Our receive windows: streams get this much (responses are small),
	// the connection is topped up to it.
	recvWindow = 1 << 30
)

var errConnDead = errors.New("h2c: connection closed")

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
		sendWindow: 65535, maxFrame: 16384, streams: map[uint32]*h2stream{}, dec: newHPACKDecoder(),
	}
	c.windowCond = sync.NewCond(&c.wmu)
	// Preface, our settings (no push; wide stream windows), and the
	// connection window opened to recvWindow.
	_, _ = c.bw.WriteString("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	settings := make([]byte, 0, 12)
	settings = binary.BigEndian.AppendUint16(settings, 0x2) // ENABLE_PUSH
	settings = binary.BigEndian.AppendUint32(settings, 0)
	settings = binary.BigEndian.AppendUint16(settings, 0x4) // INITIAL_WINDOW_SIZE
	settings = binary.BigEndian.AppendUint32(settings, recvWindow)
	c.writeFrame(frameSettings, 0, 0, settings)
	c.writeFrame(frameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, recvWindow-65535))
	if err := c.bw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func (c *h2conn) writeFrame(typ, flags byte, stream uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	_, _ = c.bw.Write(h[:])
	_, _ = c.bw.Write(payload)
}

// roundTrip sends a POST of body to path with the extra headers, already
// HPACK-encoded as literals (extra), and waits up to wait (on the caller's
// timer) for the whole response; scratch is the caller's buffer for the
// header block. It returns "" when the call succeeded (HTTP 200,
// grpc-status 0), else what went wrong.
func (c *h2conn) roundTrip(scratch *[]byte, path string, extra, body []byte, timeout *time.Timer, wait time.Duration) string {
	block := append((*scratch)[:0], 0x80|hpackMethodPOST, 0x80|hpackSchemeHTTP)
	block = hpackAppend(block, hpackPath, "", path)
	block = hpackAppend(block, hpackAuthority, "", c.authority)
	block = append(block, extra...)
	*scratch = block
	st := c.exchange(block, body, timeout, wait)
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
	block := []byte{0x80 | 2, 0x80 | hpackSchemeHTTP} // :method GET
	block = hpackAppend(block, hpackPath, "", path)
	block = hpackAppend(block, hpackAuthority, "", c.authority)
	st := c.exchange(block, nil, timeout, 10*time.Second)
	if st.err != nil {
		return st.err
	}
	if st.status != "200" {
		return fmt.Errorf("GET %s: HTTP %s", path, st.status)
	}
	return nil
}

var errTimeout = errors.New("timeout")

// exchange sends one request (a body of nil: none) and waits for its
// response.
func (c *h2conn) exchange(block, body []byte, timeout *time.Timer, wait time.Duration) *h2stream {
	st := &h2stream{done: make(chan struct{})}
	// Writers queued behind this one flush for it: under load several
	// requests leave in one write.
	c.writers.Add(1)
	c.wmu.Lock()
	for c.sendWindow < int64(len(body)) && c.deadErr() == nil {
		// What others left unflushed must leave before the server can
		// open the window again.
		if err := c.bw.Flush(); err != nil {
			c.writers.Add(-1)
			c.wmu.Unlock()
			c.fail(err)
			st.err = err
			return st
		}
		c.windowCond.Wait()
	}
	if err := c.deadErr(); err != nil {
		c.writers.Add(-1)
		c.wmu.Unlock()
		st.err = err
		return st
	}
	id := c.nextID
	c.nextID += 2
	c.smu.Lock()
	c.streams[id] = st
	c.smu.Unlock()
	if body == nil {
		c.writeFrame(frameHeaders, flagEndHeaders|flagEndStream, id, block)
	} else {
		c.writeFrame(frameHeaders, flagEndHeaders, id, block)
		for off := 0; ; {
			n := min(len(body)-off, c.maxFrame)
			flags := byte(0)
			if off+n == len(body) {
				flags = flagEndStream
			}
			c.writeFrame(frameData, flags, id, body[off:off+n])
			off += n
			if off == len(body) {
				break
			}
		}
		c.sendWindow -= int64(len(body))
	}
	var err error
	if c.writers.Add(-1) == 0 {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}

	timeout.Reset(wait)
	select {
	case <-st.done:
		timeout.Stop() // Go 1.23 timers: no stale tick is left to drain
		return st
	case <-timeout.C:
		c.smu.Lock()
		mine := c.streams[id] == st
		delete(c.streams, id)
		c.smu.Unlock()
		if !mine { // answered meanwhile
			<-st.done
			return st
		}
		return &h2stream{err: errTimeout}
	}
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
	c.smu.Unlock()
	for _, st := range streams {
		st.err = err
		close(st.done)
	}
	c.wmu.Lock()
	c.windowCond.Broadcast()
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
func (c *h2conn) finish(id uint32, st *h2stream) {
	c.smu.Lock()
	mine := c.streams[id] == st
	if mine {
		delete(c.streams, id)
	}
	c.smu.Unlock()
	if mine {
		close(st.done)
	}
}

func (c *h2conn) readLoop() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var head [9]byte
	var payload, block []byte
	var blockStream uint32
	var blockEnd bool
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			c.fail(err)
			return
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		typ, flags := head[3], head[4]
		id := binary.BigEndian.Uint32(head[5:]) & 0x7fffffff
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			c.fail(err)
			return
		}
		switch typ {
		case frameData:
			c.consumed += n
			if st := c.stream(id); st != nil {
				st.data += n
				if flags&flagEndStream != 0 {
					c.finish(id, st)
				}
			}
			if c.consumed >= 1<<20 {
				c.wmu.Lock()
				c.writeFrame(frameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, uint32(c.consumed)))
				err := c.bw.Flush()
				c.wmu.Unlock()
				c.consumed = 0
				if err != nil {
					c.fail(err)
					return
				}
			}
		case frameHeaders, frameContinuation:
			p := payload
			if typ == frameHeaders {
				if flags&flagPadded != 0 && len(p) > 0 {
					pad := int(p[0])
					p = p[1:]
					if pad > len(p) {
						c.fail(errHPACK)
						return
					}
					p = p[:len(p)-pad]
				}
				if flags&flagPriority != 0 && len(p) >= 5 {
					p = p[5:]
				}
				block, blockStream, blockEnd = append(block[:0], p...), id, flags&flagEndStream != 0
			} else {
				block = append(block, p...)
			}
			if flags&flagEndHeaders == 0 {
				continue
			}
			st := c.stream(blockStream)
			// Every block is decoded, wanted or not: the dynamic table
			// must follow the server's encoder.
			err := c.dec.decode(block, func(name, value string) {
				if st == nil {
					return
				}
				switch name {
				case ":status":
					st.status = value
				case "grpc-status":
					st.grpcStatus = value
				case "grpc-message":
					st.grpcMsg = value
				}
			})
			if err != nil {
				c.fail(err)
				return
			}
			if st != nil && blockEnd {
				c.finish(blockStream, st)
			}
		case frameRSTStream:
			if st := c.stream(id); st != nil {
				code := uint32(0)
				if len(payload) >= 4 {
					code = binary.BigEndian.Uint32(payload)
				}
				st.err = fmt.Errorf("stream reset, code %d", code)
				c.finish(id, st)
			}
		case frameSettings:
			if flags&flagAck != 0 {
				continue
			}
			for p := payload; len(p) >= 6; p = p[6:] {
				if key, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:]); key == 0x5 {
					c.wmu.Lock()
					c.maxFrame = int(v)
					c.wmu.Unlock()
				}
			}
			c.wmu.Lock()
			c.writeFrame(frameSettings, flagAck, 0, nil)
			err := c.bw.Flush()
			c.wmu.Unlock()
			if err != nil {
				c.fail(err)
				return
			}
		case framePing:
			if flags&flagAck != 0 {
				continue
			}
			c.wmu.Lock()
			c.writeFrame(framePing, flagAck, 0, payload)
			err := c.bw.Flush()
			c.wmu.Unlock()
			if err != nil {
				c.fail(err)
				return
			}
		case frameWindowUpdate:
			if id == 0 && len(payload) >= 4 {
				c.wmu.Lock()
				c.sendWindow += int64(binary.BigEndian.Uint32(payload) & 0x7fffffff)
				c.windowCond.Broadcast()
				c.wmu.Unlock()
			}
		case frameGoAway:
			msg := "goaway"
			if len(payload) > 8 {
				msg += ": " + strings.TrimSpace(string(payload[8:]))
			}
			c.fail(errors.New(msg))
			return
		}
	}
}
