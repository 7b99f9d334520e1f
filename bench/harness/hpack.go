package harness

import (
	"errors"
	"fmt"
)

// A small HPACK decoder (RFC 7541) for the load generator's HTTP/2 client:
// it only reads responses, so it needs the static and dynamic tables, the
// integer and string representations and Huffman decoding, and nothing of
// encoding beyond the literal representations hpackAppend writes.

// hpackStatic is the static table (RFC 7541, Appendix A), 1-based.
var hpackStatic = [...][2]string{
	{"", ""},
	{":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"}, {":path", "/index.html"},
	{":scheme", "http"}, {":scheme", "https"}, {":status", "200"}, {":status", "204"}, {":status", "206"},
	{":status", "304"}, {":status", "400"}, {":status", "404"}, {":status", "500"}, {"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"}, {"accept-language", ""}, {"accept-ranges", ""}, {"accept", ""},
	{"access-control-allow-origin", ""}, {"age", ""}, {"allow", ""}, {"authorization", ""}, {"cache-control", ""},
	{"content-disposition", ""}, {"content-encoding", ""}, {"content-language", ""}, {"content-length", ""},
	{"content-location", ""}, {"content-range", ""}, {"content-type", ""}, {"cookie", ""}, {"date", ""},
	{"etag", ""}, {"expect", ""}, {"expires", ""}, {"from", ""}, {"host", ""}, {"if-match", ""},
	{"if-modified-since", ""}, {"if-none-match", ""}, {"if-range", ""}, {"if-unmodified-since", ""},
	{"last-modified", ""}, {"link", ""}, {"location", ""}, {"max-forwards", ""}, {"proxy-authenticate", ""},
	{"proxy-authorization", ""}, {"range", ""}, {"referer", ""}, {"refresh", ""}, {"retry-after", ""},
	{"server", ""}, {"set-cookie", ""}, {"strict-transport-security", ""}, {"transfer-encoding", ""},
	{"user-agent", ""}, {"vary", ""}, {"via", ""}, {"www-authenticate", ""},
}

// Static table indexes the request encoder uses.
const (
	hpackAuthority     = 1
	hpackMethodPOST    = 3
	hpackPath          = 4
	hpackSchemeHTTP    = 6
	hpackAuthorization = 23
	hpackContentType   = 31
)

// huffmanCode is the Huffman code of each byte value (RFC 7541, Appendix
// B): the code, right-aligned, and its length in bits.
var huffmanCode = [256]struct {
	code uint32
	bits uint8
}{
	{0x1ff8, 13}, {0x7fffd8, 23}, {0xfffffe2, 28}, {0xfffffe3, 28}, {0xfffffe4, 28}, {0xfffffe5, 28}, {0xfffffe6, 28}, {0xfffffe7, 28},
	{0xfffffe8, 28}, {0xffffea, 24}, {0x3ffffffc, 30}, {0xfffffe9, 28}, {0xfffffea, 28}, {0x3ffffffd, 30}, {0xfffffeb, 28}, {0xfffffec, 28},
	{0xfffffed, 28}, {0xfffffee, 28}, {0xfffffef, 28}, {0xffffff0, 28}, {0xffffff1, 28}, {0xffffff2, 28}, {0x3ffffffe, 30}, {0xffffff3, 28},
	{0xffffff4, 28}, {0xffffff5, 28}, {0xffffff6, 28}, {0xffffff7, 28}, {0xffffff8, 28}, {0xffffff9, 28}, {0xffffffa, 28}, {0xffffffb, 28},
	{0x14, 6}, {0x3f8, 10}, {0x3f9, 10}, {0xffa, 12}, {0x1ff9, 13}, {0x15, 6}, {0xf8, 8}, {0x7fa, 11},
	{0x3fa, 10}, {0x3fb, 10}, {0xf9, 8}, {0x7fb, 11}, {0xfa, 8}, {0x16, 6}, {0x17, 6}, {0x18, 6},
	{0x0, 5}, {0x1, 5}, {0x2, 5}, {0x19, 6}, {0x1a, 6}, {0x1b, 6}, {0x1c, 6}, {0x1d, 6},
	{0x1e, 6}, {0x1f, 6}, {0x5c, 7}, {0xfb, 8}, {0x7ffc, 15}, {0x20, 6}, {0xffb, 12}, {0x3fc, 10},
	{0x1ffa, 13}, {0x21, 6}, {0x5d, 7}, {0x5e, 7}, {0x5f, 7}, {0x60, 7}, {0x61, 7}, {0x62, 7},
	{0x63, 7}, {0x64, 7}, {0x65, 7}, {0x66, 7}, {0x67, 7}, {0x68, 7}, {0x69, 7}, {0x6a, 7},
	{0x6b, 7}, {0x6c, 7}, {0x6d, 7}, {0x6e, 7}, {0x6f, 7}, {0x70, 7}, {0x71, 7}, {0x72, 7},
	{0xfc, 8}, {0x73, 7}, {0xfd, 8}, {0x1ffb, 13}, {0x7fff0, 19}, {0x1ffc, 13}, {0x3ffc, 14}, {0x22, 6},
	{0x7ffd, 15}, {0x3, 5}, {0x23, 6}, {0x4, 5}, {0x24, 6}, {0x5, 5}, {0x25, 6}, {0x26, 6},
	{0x27, 6}, {0x6, 5}, {0x74, 7}, {0x75, 7}, {0x28, 6}, {0x29, 6}, {0x2a, 6}, {0x7, 5},
	{0x2b, 6}, {0x76, 7}, {0x2c, 6}, {0x8, 5}, {0x9, 5}, {0x2d, 6}, {0x77, 7}, {0x78, 7},
	{0x79, 7}, {0x7a, 7}, {0x7b, 7}, {0x7ffe, 15}, {0x7fc, 11}, {0x3ffd, 14}, {0x1ffd, 13}, {0xffffffc, 28},
	{0xfffe6, 20}, {0x3fffd2, 22}, {0xfffe7, 20}, {0xfffe8, 20}, {0x3fffd3, 22}, {0x3fffd4, 22}, {0x3fffd5, 22}, {0x7fffd9, 23},
	{0x3fffd6, 22}, {0x7fffda, 23}, {0x7fffdb, 23}, {0x7fffdc, 23}, {0x7fffdd, 23}, {0x7fffde, 23}, {0xffffeb, 24}, {0x7fffdf, 23},
	{0xffffec, 24}, {0xffffed, 24}, {0x3fffd7, 22}, {0x7fffe0, 23}, {0xffffee, 24}, {0x7fffe1, 23}, {0x7fffe2, 23}, {0x7fffe3, 23},
	{0x7fffe4, 23}, {0x1fffdc, 21}, {0x3fffd8, 22}, {0x7fffe5, 23}, {0x3fffd9, 22}, {0x7fffe6, 23}, {0x7fffe7, 23}, {0xffffef, 24},
	{0x3fffda, 22}, {0x1fffdd, 21}, {0xfffe9, 20}, {0x3fffdb, 22}, {0x3fffdc, 22}, {0x7fffe8, 23}, {0x7fffe9, 23}, {0x1fffde, 21},
	{0x7fffea, 23}, {0x3fffdd, 22}, {0x3fffde, 22}, {0xfffff0, 24}, {0x1fffdf, 21}, {0x3fffdf, 22}, {0x7fffeb, 23}, {0x7fffec, 23},
	{0x1fffe0, 21}, {0x1fffe1, 21}, {0x3fffe0, 22}, {0x1fffe2, 21}, {0x7fffed, 23}, {0x3fffe1, 22}, {0x7fffee, 23}, {0x7fffef, 23},
	{0xfffea, 20}, {0x3fffe2, 22}, {0x3fffe3, 22}, {0x3fffe4, 22}, {0x7ffff0, 23}, {0x3fffe5, 22}, {0x3fffe6, 22}, {0x7ffff1, 23},
	{0x3ffffe0, 26}, {0x3ffffe1, 26}, {0xfffeb, 20}, {0x7fff1, 19}, {0x3fffe7, 22}, {0x7ffff2, 23}, {0x3fffe8, 22}, {0x1ffffec, 25},
	{0x3ffffe2, 26}, {0x3ffffe3, 26}, {0x3ffffe4, 26}, {0x7ffffde, 27}, {0x7ffffdf, 27}, {0x3ffffe5, 26}, {0xfffff1, 24}, {0x1ffffed, 25},
	{0x7fff2, 19}, {0x1fffe3, 21}, {0x3ffffe6, 26}, {0x7ffffe0, 27}, {0x7ffffe1, 27}, {0x3ffffe7, 26}, {0x7ffffe2, 27}, {0xfffff2, 24},
	{0x1fffe4, 21}, {0x1fffe5, 21}, {0x3ffffe8, 26}, {0x3ffffe9, 26}, {0xffffffd, 28}, {0x7ffffe3, 27}, {0x7ffffe4, 27}, {0x7ffffe5, 27},
	{0xfffec, 20}, {0xfffff3, 24}, {0xfffed, 20}, {0x1fffe6, 21}, {0x3fffe9, 22}, {0x1fffe7, 21}, {0x1fffe8, 21}, {0x7ffff3, 23},
	{0x3fffea, 22}, {0x3fffeb, 22}, {0x1ffffee, 25}, {0x1ffffef, 25}, {0xfffff4, 24}, {0xfffff5, 24}, {0x3ffffea, 26}, {0x7ffff4, 23},
	{0x3ffffeb, 26}, {0x7ffffe6, 27}, {0x3ffffec, 26}, {0x3ffffed, 26}, {0x7ffffe7, 27}, {0x7ffffe8, 27}, {0x7ffffe9, 27}, {0x7ffffea, 27},
	{0x7ffffeb, 27}, {0xffffffe, 28}, {0x7ffffec, 27}, {0x7ffffed, 27}, {0x7ffffee, 27}, {0x7ffffef, 27}, {0x7fffff0, 27}, {0x3ffffee, 26},
}

// huffmanNode is the decoding tree: a leaf has sym >= 0.
type huffmanNode struct {
	child [2]*huffmanNode
	sym   int
}

var huffmanRoot = func() *huffmanNode {
	root := &huffmanNode{sym: -1}
	for sym, c := range huffmanCode {
		n := root
		for i := int(c.bits) - 1; i >= 0; i-- {
			bit := (c.code >> uint(i)) & 1
			if n.child[bit] == nil {
				n.child[bit] = &huffmanNode{sym: -1}
			}
			n = n.child[bit]
		}
		n.sym = sym
	}
	return root
}()

var errHPACK = errors.New("hpack: malformed header block")

func huffmanDecode(dst, src []byte) ([]byte, error) {
	n := huffmanRoot
	depth := 0
	for _, b := range src {
		for i := 7; i >= 0; i-- {
			n = n.child[(b>>uint(i))&1]
			depth++
			if n == nil {
				return nil, errHPACK
			}
			if n.sym >= 0 {
				dst = append(dst, byte(n.sym))
				n, depth = huffmanRoot, 0
			}
		}
	}
	// The padding is the most significant bits of EOS: at most 7 ones.
	if depth > 7 {
		return nil, errHPACK
	}
	return dst, nil
}

// hpackDecoder holds the dynamic table of one connection's responses.
type hpackDecoder struct {
	dyn     [][2]string // newest first
	size    int
	maxSize int
}

func newHPACKDecoder() *hpackDecoder { return &hpackDecoder{maxSize: 4096} }

func (d *hpackDecoder) entry(i uint64) ([2]string, error) {
	if i == 0 {
		return [2]string{}, errHPACK
	}
	if i < uint64(len(hpackStatic)) {
		return hpackStatic[i], nil
	}
	i -= uint64(len(hpackStatic))
	if i >= uint64(len(d.dyn)) {
		return [2]string{}, fmt.Errorf("hpack: index %d beyond the dynamic table", i+uint64(len(hpackStatic)))
	}
	return d.dyn[i], nil
}

func (d *hpackDecoder) add(f [2]string) {
	d.dyn = append([][2]string{f}, d.dyn...)
	d.size += len(f[0]) + len(f[1]) + 32
	d.evict()
}

func (d *hpackDecoder) evict() {
	for d.size > d.maxSize && len(d.dyn) > 0 {
		last := d.dyn[len(d.dyn)-1]
		d.size -= len(last[0]) + len(last[1]) + 32
		d.dyn = d.dyn[:len(d.dyn)-1]
	}
}

// decode calls emit for every field of a complete header block.
func (d *hpackDecoder) decode(block []byte, emit func(name, value string)) error {
	for len(block) > 0 {
		b := block[0]
		switch {
		case b&0x80 != 0: // indexed field
			i, rest, err := hpackInt(block, 7)
			if err != nil {
				return err
			}
			f, err := d.entry(i)
			if err != nil {
				return err
			}
			emit(f[0], f[1])
			block = rest
		case b&0xc0 == 0x40: // literal, incremental indexing
			f, rest, err := d.literal(block, 6)
			if err != nil {
				return err
			}
			d.add(f)
			emit(f[0], f[1])
			block = rest
		case b&0xe0 == 0x20: // dynamic table size update
			size, rest, err := hpackInt(block, 5)
			if err != nil {
				return err
			}
			d.maxSize = int(size)
			d.evict()
			block = rest
		default: // literal without indexing (0000) or never indexed (0001)
			f, rest, err := d.literal(block, 4)
			if err != nil {
				return err
			}
			emit(f[0], f[1])
			block = rest
		}
	}
	return nil
}

func (d *hpackDecoder) literal(block []byte, prefix uint8) ([2]string, []byte, error) {
	i, rest, err := hpackInt(block, prefix)
	if err != nil {
		return [2]string{}, nil, err
	}
	var f [2]string
	if i == 0 {
		if f[0], rest, err = hpackString(rest); err != nil {
			return f, nil, err
		}
	} else {
		e, err := d.entry(i)
		if err != nil {
			return f, nil, err
		}
		f[0] = e[0]
	}
	f[1], rest, err = hpackString(rest)
	return f, rest, err
}

// hpackInt reads an integer with an n-bit prefix (RFC 7541, 5.1).
func hpackInt(b []byte, n uint8) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errHPACK
	}
	mask := byte(1<<n - 1)
	v := uint64(b[0] & mask)
	b = b[1:]
	if v < uint64(mask) {
		return v, b, nil
	}
	var m uint
	for {
		if len(b) == 0 || m > 56 {
			return 0, nil, errHPACK
		}
		c := b[0]
		b = b[1:]
		v += uint64(c&0x7f) << m
		m += 7
		if c&0x80 == 0 {
			return v, b, nil
		}
	}
}

func hpackString(b []byte) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errHPACK
	}
	huff := b[0]&0x80 != 0
	n, rest, err := hpackInt(b, 7)
	if err != nil || uint64(len(rest)) < n {
		return "", nil, errHPACK
	}
	raw := rest[:n]
	rest = rest[n:]
	if !huff {
		return string(raw), rest, nil
	}
	out, err := huffmanDecode(make([]byte, 0, len(raw)*8/5+1), raw)
	return string(out), rest, err
}

// hpackAppendInt appends an integer with an n-bit prefix whose other bits
// are first.
func hpackAppendInt(b []byte, first byte, n uint8, v uint64) []byte {
	max := uint64(1<<n - 1)
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	v -= max
	for v >= 0x80 {
		b = append(b, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// hpackAppend appends a field as a literal without indexing: the name by
// its static index (nameIndex > 0) or spelled out, the value as is.
func hpackAppend(b []byte, nameIndex uint64, name, value string) []byte {
	b = hpackAppendInt(b, 0x00, 4, nameIndex)
	if nameIndex == 0 {
		b = hpackAppendInt(b, 0x00, 7, uint64(len(name)))
		b = append(b, name...)
	}
	b = hpackAppendInt(b, 0x00, 7, uint64(len(value)))
	return append(b, value...)
}
