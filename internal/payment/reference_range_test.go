package payment_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/payment"
)

// A transfer reference is the range of ids it is the prefix of, both ends
// included; anything but 8 hexadecimal characters is refused. (Tested only
// over the wire before: the mutation run counted ReferenceRange not
// covered by the package's tests.)
func TestReferenceRangeIsTheIDsItPrefixes(t *testing.T) {
	t.Parallel()
	r, err := payment.ReferenceRange("0a1B2c3D")
	require.NoError(t, err)
	require.Equal(t, [2]uuid.UUID{
		uuid.MustParse("0a1b2c3d-0000-0000-0000-000000000000"),
		uuid.MustParse("0a1b2c3d-ffff-ffff-ffff-ffffffffffff"),
	}, r)
	id := uuid.MustParse("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
	r, err = payment.ReferenceRange(payment.Reference(id))
	require.NoError(t, err)
	require.LessOrEqual(t, r[0].String(), id.String())
	require.GreaterOrEqual(t, r[1].String(), id.String())
	for _, bad := range []string{"", "0a1b2c3", "0a1b2c3d0", "0a1b2c3g", "0a1b 2c3"} {
		_, err := payment.ReferenceRange(bad)
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%q: %v", bad, err)
	}
}
