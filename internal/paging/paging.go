package paging

import "github.com/rustbill/paymentd/internal/apperr"

// The bounds: page is 1-based with 0 meaning 1; a page size of 0 means
// DefaultSize; more than MaxSize, or a page beyond MaxNumber, is refused.
const (
	DefaultSize = 20
	MaxSize     = 100
	MaxNumber   = 1_000_000
)

// Page is one page of a list: which page, its size, and the number of rows
// of the whole list.
type Page struct {
	Number uint32
	Size   uint32
	Total  uint64
}

// Normalize applies the defaults and bounds to a request's page and page
// size; a page outside them is InvalidArgument.
func Normalize(number, size uint32) (Page, error) {
	if number == 0 {
		number = 1
	}
	if size == 0 {
		size = DefaultSize
	}
	if size > MaxSize || number > MaxNumber {
		return Page{}, apperr.New(apperr.InvalidArgument, "page_size must be at most %d and page at most %d", MaxSize, MaxNumber)
	}
	return Page{Number: number, Size: size}, nil
}

// Limit is the page's LIMIT.
func (p Page) Limit() int64 { return int64(p.Size) }

// Offset is the page's OFFSET.
func (p Page) Offset() int64 { return int64(p.Number-1) * int64(p.Size) }

// WithTotal is the page with the list's row count.
func (p Page) WithTotal(total int64) Page {
	p.Total = uint64(max(total, 0))
	return p
}

// TotalPages is ceil(Total / Size).
func (p Page) TotalPages() uint32 {
	if p.Size == 0 {
		return 0
	}
	return uint32(min((p.Total+uint64(p.Size)-1)/uint64(p.Size), uint64(^uint32(0))))
}
