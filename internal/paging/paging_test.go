package paging_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/paging"
)

func TestNormalizeAppliesTheDefaultsAndRefusesPagesOutOfBounds(t *testing.T) {
	t.Parallel()
	pg, err := paging.Normalize(0, 0)
	require.NoError(t, err)
	require.Equal(t, paging.Page{Number: 1, Size: paging.DefaultSize}, pg)
	require.Zero(t, pg.Offset())
	require.EqualValues(t, 3, pg.WithTotal(41).TotalPages())

	pg, err = paging.Normalize(3, 25)
	require.NoError(t, err)
	require.EqualValues(t, 25, pg.Limit())
	require.EqualValues(t, 50, pg.Offset())
	require.EqualValues(t, 3, pg.WithTotal(51).TotalPages())
	require.EqualValues(t, 2, pg.WithTotal(50).TotalPages())
	require.Zero(t, pg.WithTotal(0).TotalPages())

	for _, bad := range [][2]uint32{{1, paging.MaxSize + 1}, {paging.MaxNumber + 1, 10}} {
		_, err := paging.Normalize(bad[0], bad[1])
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "page %d size %d: %v", bad[0], bad[1], err)
	}
}
