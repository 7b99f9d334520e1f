package identity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPasswordHashVerifiesOnlyTheSamePassword(t *testing.T) {
	t.Parallel()
	h, err := hashPasswordAt(productionCost, "correct horse battery staple")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$"), h)
	require.NoError(t, VerifyPassword(h, "correct horse battery staple"))
	require.ErrorIs(t, VerifyPassword(h, "correct horse battery stapl"), ErrPasswordMismatch)
	require.ErrorIs(t, VerifyPassword(h, ""), ErrPasswordMismatch)
}

// Test binaries hash new passwords at the smallest cost (the suite makes
// hundreds); paymentd itself never does, and such hashes verify like any.
func TestTestBinariesHashAtTheSmallCostAndItVerifies(t *testing.T) {
	t.Parallel()
	require.Equal(t, testCost, newHashCost())
	require.Equal(t, argonCost{time: 3, memory: 64 * 1024, threads: 2}, productionCost, "RFC 9106's second option")
	h, err := HashPassword("pw")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$"), h)
	require.NoError(t, VerifyPassword(h, "pw"))
	require.ErrorIs(t, VerifyPassword(h, "pW"), ErrPasswordMismatch)
}

func TestPasswordHashesAreSalted(t *testing.T) {
	t.Parallel()
	a, err := HashPassword("same")
	require.NoError(t, err)
	b, err := HashPassword("same")
	require.NoError(t, err)
	require.NotEqual(t, a, b)
}

func TestMalformedHashesAreErrorsNotMatches(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "plain", "$argon2i$v=19$m=65536,t=3,p=2$c2FsdA$a2V5", "$argon2id$v=19$m=999999999,t=3,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5", "$argon2id$v=19$m=65536,t=3,p=2$!!$a2V5"} {
		err := VerifyPassword(h, "x")
		require.Error(t, err, h)
		require.NotErrorIs(t, err, ErrPasswordMismatch, h)
	}
}

// The dummy hash an unknown user's login is verified against must cost
// what a real verification costs: the same argon2id parameters, salt and
// key lengths as HashPassword's, and a well-formed hash (a parse error
// would return at once and tell unknown users apart by timing).
func TestDummyHashCostsWhatARealHashCosts(t *testing.T) {
	t.Parallel()
	real, err := hashPasswordAt(productionCost, "anything")
	require.NoError(t, err)
	d, r := strings.Split(dummyHash, "$"), strings.Split(real, "$")
	require.Len(t, d, 6)
	require.Equal(t, r[:4], d[:4], "algorithm, version and parameters")
	require.Equal(t, len(r[4]), len(d[4]), "salt length")
	require.Equal(t, len(r[5]), len(d[5]), "key length")
	require.ErrorIs(t, VerifyPassword(dummyHash, "anything"), ErrPasswordMismatch)
}
