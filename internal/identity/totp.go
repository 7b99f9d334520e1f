package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"image/png"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Two-factor sign-in for admins: TOTP (RFC 6238: SHA-1, 6 digits, 30-second
// steps, as every authenticator app reads an otpauth:// URL), with one-time
// recovery codes.
//
//	(none) --StartTotpEnrolment--> pending --ConfirmTotpEnrolment(code)--> confirmed
//	   ^                              |                                       |
//	   +------ DisableTotp(password) / paymentd admin reset-2fa --------------+
//
// The secret is sealed under [secrets] (the keyring that seals plugin
// secrets), bound to the admin's id, and opened only to check a code. A code
// is accepted once: the step of the last accepted code is stored, and only
// a later step's code is accepted after it (UseAdminTOTPStep), so a code
// seen over a shoulder or in a log cannot be replayed within its window.
const (
	totpIssuer    = "paymentd"
	totpPeriod    = 30
	totpDigits    = otp.DigitsSix
	totpSkewSteps = 1
	// recoveryCodes are made at confirmation, each 80 random bits written
	// as 16 base32 letters in groups of four. That much entropy makes
	// SHA-256 as good as a slow hash: nobody can guess through 2^80.
	recoveryCodes     = 10
	recoveryCodeBytes = 10
)

// secondFactorBudget bounds the guessing of an admin's second factor, TOTP
// and recovery codes alike, across every address and instance (the count
// is admin_users.totp_failures). Four wrong codes in a row are free (typos,
// a clock off by a minute); the fifth locks codes out for a minute, and
// each wrong one after a lock for twice as long as the last, at most a day.
// So 16 guesses fill the first day and then one a day is left: 100 wrong
// codes in a row (NIST SP 800-63B's most) take some 85 days, and each
// guess has 3 chances in a million (the step and one either side). A right
// code ends the run; so does an operator (paymentd admin unlock-2fa).
var secondFactorBudget = store.SecondFactorBudget{FreeFailures: 5, BaseLock: time.Minute, MaxLock: 24 * time.Hour}

// The outcomes SecondFactorMetrics counts.
const (
	SecondFactorWrong  = "wrong"
	SecondFactorLocked = "locked"
)

// Audit actions of two-factor sign-in.
const (
	ActionTOTPEnrolmentStarted = "admin.totp_enrolment_started"
	ActionTOTPConfirmed        = "admin.totp_confirmed"
	ActionTOTPDisabled         = "admin.totp_disabled"
	ActionTOTPReset            = "admin.totp_reset"
	ActionRecoveryCodeUsed     = "admin.recovery_code_used"
	// ActionSecondFactorFailed is a second-factor code judged wrong after
	// a right password (one row each; codes refused unjudged under a lock
	// are only counted in metrics, so a flood cannot flood the log).
	ActionSecondFactorFailed = "admin.second_factor_failed"
	// ActionSecondFactorUnlocked is an operator's unlock-2fa.
	ActionSecondFactorUnlocked = "admin.second_factor_unlocked"
)

// ReasonTOTPRequired is the ErrorInfo reason of AdminLogin's answer to a
// right password without the code the admin's 2FA needs; ReasonTOTPInvalid
// that of a wrong code. The console asks for the code on either.
const (
	ReasonTOTPRequired = "totp_required"
	ReasonTOTPInvalid  = "totp_invalid"
	// ReasonTOTPLocked is the reason of the ResourceExhausted answer to a
	// code sent while the admin's codes are locked out after too many
	// wrong ones: the code was not judged.
	ReasonTOTPLocked = "totp_locked"
)

// TOTPLockedError is AdminLogin's ResourceExhausted answer to a code sent
// while the admin's codes are locked out; the handler adds the reason and
// RetryAfter (RetryInfo, Retry-After).
type TOTPLockedError struct{ RetryAfter time.Duration }

func (e *TOTPLockedError) Error() string {
	return "too many wrong two-factor codes in a row: codes for this admin are refused unread until the lock ends (an operator can lift it: paymentd admin unlock-2fa)"
}

// TOTPError is AdminLogin's Unauthenticated answer that asks for a code;
// the handler adds Reason as an ErrorInfo detail.
type TOTPError struct{ Reason string }

func (e *TOTPError) Error() string {
	if e.Reason == ReasonTOTPRequired {
		return "a two-factor code is required"
	}
	return "invalid two-factor code"
}

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// TOTPEnrolment is what StartTOTPEnrolment answers: never stored in clear.
type TOTPEnrolment struct {
	URL    string
	Secret string
	// QRPNG is the URL as a QR code, a data:image/png;base64 URL.
	QRPNG string
}

// totpAAD binds a sealed secret to its admin: copied to another admin's
// row, it does not open.
func totpAAD(admin uuid.UUID) []byte { return []byte("admin_users.totp_secret:" + admin.String()) }

func (s *Service) sealTOTP(admin uuid.UUID, secret string) (string, error) {
	if s.keyring == nil {
		return "", apperr.New(apperr.FailedPrecondition, "two-factor sign-in needs a key in [secrets] to seal its secrets; none is configured")
	}
	return s.keyring.Seal(secret, totpAAD(admin))
}

func (s *Service) openTOTP(admin uuid.UUID, sealed string) (string, error) {
	if s.keyring == nil {
		return "", apperr.Wrap(apperr.Internal, errors.New("no [secrets] keyring"), "the two-factor secret cannot be opened")
	}
	return s.keyring.Open(sealed, totpAAD(admin))
}

// errWrongPassword answers a wrong password where a signed-in admin
// confirms a change with it (enrolment, DisableTotp).
var errWrongPassword = apperr.New(apperr.PermissionDenied, "the password is not right")

// confirmPassword checks the calling admin's password, for a change of
// their second factor: a stolen session alone cannot make one.
func (s *Service) confirmPassword(ctx context.Context, a store.Admin, password string) error {
	// The password budgets first (the global one and the admin's), as for
	// every password a caller sends: a stolen session is no faster way to
	// guess it.
	if err := s.admitPassword(ctx, adminBudgetKey(a.Username)); err != nil {
		return err
	}
	ok, err := s.checkPassword(ctx, a.PasswordHash, password)
	if err != nil {
		return err
	}
	if !ok {
		return errWrongPassword
	}
	return nil
}

// StartTOTPEnrolment makes a new secret for the calling admin (a session,
// never a key, and their password) and stores it sealed as a pending
// enrolment.
func (s *Service) StartTOTPEnrolment(ctx context.Context, password string) (TOTPEnrolment, error) {
	p, err := requireAdminSession(ctx)
	if err != nil {
		return TOTPEnrolment{}, err
	}
	a, err := store.GetAdmin(ctx, s.db, p.ID)
	if err != nil {
		return TOTPEnrolment{}, err
	}
	if err := s.confirmPassword(ctx, a, password); err != nil {
		return TOTPEnrolment{}, err
	}
	if a.TOTPConfirmedAt != nil {
		return TOTPEnrolment{}, apperr.New(apperr.FailedPrecondition, "two-factor sign-in is on already; turn it off first to enrol again")
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: a.Username, Period: totpPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return TOTPEnrolment{}, err
	}
	sealed, err := s.sealTOTP(a.ID, key.Secret())
	if err != nil {
		return TOTPEnrolment{}, err
	}
	img, err := key.Image(256, 256)
	if err != nil {
		return TOTPEnrolment{}, err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return TOTPEnrolment{}, err
	}
	now := s.now()
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := store.StartAdminTOTP(ctx, tx, a.ID, sealed, now); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return apperr.New(apperr.FailedPrecondition, "two-factor sign-in is on already; turn it off first to enrol again")
			}
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionTOTPEnrolmentStarted, "admin_user", a.ID.String(), nil, nil)
	})
	if err != nil {
		return TOTPEnrolment{}, err
	}
	return TOTPEnrolment{URL: key.URL(), Secret: key.Secret(), QRPNG: "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}

// TOTPConfirmation is what ConfirmTOTPEnrolment hands back.
type TOTPConfirmation struct {
	// RecoveryCodes are shown this once.
	RecoveryCodes []string
	// Session replaces the one the enrolment was confirmed in.
	Session AdminSession
}

// ConfirmTOTPEnrolment confirms the calling admin's pending enrolment with
// their password and a code of the new secret, and answers the recovery
// codes, shown once. Every session of the admin was started without the
// second factor, so all end, and a new one replaces the caller's
// (userAgent and remoteAddr are stored with it); API keys stay.
//
// A wrong code here is not counted in secondFactorBudget: it is a code of
// a secret the caller was just given, not a guess at the admin's factor,
// and each try costs a password check.
func (s *Service) ConfirmTOTPEnrolment(ctx context.Context, password, code, userAgent, remoteAddr string) (TOTPConfirmation, error) {
	p, err := requireAdminSession(ctx)
	if err != nil {
		return TOTPConfirmation{}, err
	}
	a, err := store.GetAdmin(ctx, s.db, p.ID)
	if err != nil {
		return TOTPConfirmation{}, err
	}
	if err := s.confirmPassword(ctx, a, password); err != nil {
		return TOTPConfirmation{}, err
	}
	if a.TOTPSecret == "" || a.TOTPConfirmedAt != nil {
		return TOTPConfirmation{}, apperr.New(apperr.FailedPrecondition, "no two-factor enrolment is pending; start one first")
	}
	secret, err := s.openTOTP(a.ID, a.TOTPSecret)
	if err != nil {
		return TOTPConfirmation{}, err
	}
	now := s.now()
	step, ok := matchTOTP(secret, strings.TrimSpace(code), now)
	if !ok {
		return TOTPConfirmation{}, apperr.New(apperr.InvalidArgument, "the code is not the authenticator app's current one")
	}
	codes, hashes, err := newRecoveryCodes()
	if err != nil {
		return TOTPConfirmation{}, err
	}
	token, row, err := s.newSession(a.ID, userAgent, remoteAddr, now)
	if err != nil {
		return TOTPConfirmation{}, err
	}
	var ended [][]byte
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := store.ConfirmAdminTOTP(ctx, tx, a.ID, a.TOTPSecret, step, now); err != nil {
			return store.NotFound(err, "the two-factor enrolment changed meanwhile; start again")
		}
		if err := store.ReplaceAdminRecoveryCodes(ctx, tx, a.ID, hashes, now); err != nil {
			return err
		}
		if ended, _, err = cutOff(ctx, tx, audit.Of(p), a.ID, &p.ID, now, true, ActionTOTPConfirmed); err != nil {
			return err
		}
		if _, err := store.InsertSession(ctx, tx, row); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionTOTPConfirmed, "admin_user", a.ID.String(), nil, map[string]any{
			"recovery_codes": len(codes), "sessions_ended": len(ended), "session": sessionLabel(row.ID),
		})
	})
	if err != nil {
		return TOTPConfirmation{}, err
	}
	for _, id := range ended {
		s.cacheDelete(ctx, id)
	}
	s.cacheNewSession(ctx, row, true)
	return TOTPConfirmation{RecoveryCodes: codes, Session: AdminSession{Admin: adminOf(a), Token: token, ExpiresAt: row.AbsoluteExpiresAt}}, nil
}

// DisableTOTP removes the calling admin's 2FA, given their password.
func (s *Service) DisableTOTP(ctx context.Context, password string) error {
	p, err := requireAdminSession(ctx)
	if err != nil {
		return err
	}
	if s.require2FA {
		return apperr.New(apperr.FailedPrecondition, "two-factor sign-in is required for every admin ([admin].require_2fa) and cannot be turned off; an operator can reset it (paymentd admin reset-2fa)")
	}
	a, err := store.GetAdmin(ctx, s.db, p.ID)
	if err != nil {
		return err
	}
	if err := s.confirmPassword(ctx, a, password); err != nil {
		return err
	}
	now := s.now()
	return store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		had, err := store.ClearAdminTOTP(ctx, tx, a.ID, now)
		if err != nil || !had {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionTOTPDisabled, "admin_user", a.ID.String(), nil, nil)
	})
}

// ResetTOTP removes an admin's 2FA (`paymentd admin reset-2fa`), for an
// admin who lost their authenticator and recovery codes; false when they
// had none.
func (o Operator) ResetTOTP(ctx context.Context, username string) (bool, error) {
	now := o.now()
	var had bool
	err := store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		a, err := store.GetAdminByUsername(ctx, tx, username)
		if err != nil {
			return store.NotFound(err, "no admin named %q", username)
		}
		if had, err = store.ClearAdminTOTP(ctx, tx, a.ID, now); err != nil || !had {
			return err
		}
		return audit.Write(ctx, tx, o.actor(), now, ActionTOTPReset, "admin_user", a.ID.String(), nil, map[string]any{"username": a.Username})
	})
	return had, err
}

// UnlockSecondFactor ends an admin's run of wrong second-factor codes and
// any lock it set (`paymentd admin unlock-2fa`), keeping their second
// factor; false when there was none.
func (o Operator) UnlockSecondFactor(ctx context.Context, username string) (bool, error) {
	now := o.now()
	var had bool
	err := store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		a, err := store.GetAdminByUsername(ctx, tx, username)
		if err != nil {
			return store.NotFound(err, "no admin named %q", username)
		}
		if had, err = store.ResetAdminSecondFactorFailures(ctx, tx, a.ID); err != nil || !had {
			return err
		}
		before := map[string]any{"totp_failures": a.TOTPFailures}
		if a.TOTPLockedUntil != nil {
			before["totp_locked_until"] = *a.TOTPLockedUntil
		}
		return audit.Note(ctx, tx, o.actor(), now, ActionSecondFactorUnlocked, "admin_user", a.ID.String(), before, map[string]any{"username": a.Username})
	})
	return had, err
}

// checkSecondFactor is AdminLogin's check of a confirmed admin's code: a
// TOTP code of a step not accepted before, or an unspent recovery code
// (spent here, with an audit row). Both draw on one budget
// (secondFactorBudget): the code is counted as wrong before it is judged,
// and refused unjudged while a lock holds (*TOTPLockedError); a right one
// sets the count back. Each wrong code is audited.
func (s *Service) checkSecondFactor(ctx context.Context, a store.Admin, code, remoteAddr string, now time.Time) error {
	code = strings.TrimSpace(code)
	if code == "" {
		return &TOTPError{Reason: ReasonTOTPRequired}
	}
	attempt, err := store.CountAdminSecondFactorAttempt(ctx, s.db, a.ID, now, secondFactorBudget)
	if err != nil {
		return err
	}
	if !attempt.Allowed {
		s.countFactor(SecondFactorLocked)
		retry := time.Second
		if attempt.LockedUntil != nil {
			retry = max(attempt.LockedUntil.Sub(now), time.Second)
		}
		return &TOTPLockedError{RetryAfter: retry}
	}
	kind := "totp"
	ok := false
	if len(code) <= 8 {
		if ok, err = s.checkTOTPCode(ctx, a, code, now); err != nil {
			return err
		}
	} else {
		kind = "recovery_code"
		if ok, err = s.spendRecoveryCode(ctx, a, code, now); err != nil {
			return err
		}
	}
	if ok {
		return nil
	}
	s.countFactor(SecondFactorWrong)
	after := map[string]any{"kind": kind, "failures": attempt.Failures, "remote_addr": remoteAddr}
	if attempt.LockedUntil != nil {
		after["locked_until"] = *attempt.LockedUntil
	}
	who := auth.Principal{Role: auth.RoleAdmin, ID: a.ID, Kind: auth.KindSession}
	if err := audit.Note(ctx, s.db, audit.Of(who), now, ActionSecondFactorFailed, "admin_user", a.ID.String(), nil, after); err != nil {
		return err
	}
	return &TOTPError{Reason: ReasonTOTPInvalid}
}

// checkTOTPCode reports whether code is the admin's TOTP code of a step not
// accepted before, accepting it (which ends the run of wrong codes).
func (s *Service) checkTOTPCode(ctx context.Context, a store.Admin, code string, now time.Time) (bool, error) {
	secret, err := s.openTOTP(a.ID, a.TOTPSecret)
	if err != nil {
		return false, err
	}
	step, ok := matchTOTP(secret, code, now)
	if !ok {
		return false, nil
	}
	return store.UseAdminTOTPStep(ctx, s.db, a.ID, step)
}

// spendRecoveryCode reports whether code is an unspent recovery code of the
// admin, spending it (audited, and ending the run of wrong codes).
func (s *Service) spendRecoveryCode(ctx context.Context, a store.Admin, code string, now time.Time) (bool, error) {
	sum := recoveryHash(code)
	ok := false
	err := store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		if ok, err = store.UseAdminRecoveryCode(ctx, tx, a.ID, sum, now); err != nil || !ok {
			return err
		}
		if _, err := store.ResetAdminSecondFactorFailures(ctx, tx, a.ID); err != nil {
			return err
		}
		left, err := store.Q(tx).CountAdminRecoveryCodesLeft(ctx, a.ID)
		if err != nil {
			return err
		}
		who := auth.Principal{Role: auth.RoleAdmin, ID: a.ID, Kind: auth.KindSession}
		return audit.Write(ctx, tx, audit.Of(who), now, ActionRecoveryCodeUsed, "admin_user", a.ID.String(), nil, map[string]any{"recovery_codes_left": left})
	})
	return ok, err
}

func (s *Service) countFactor(outcome string) {
	if s.factorMetrics != nil {
		s.factorMetrics.SecondFactorRefused(outcome)
	}
}

// matchTOTP finds the step, within one step either side of now, whose code
// is code (compared in constant time); false when none.
func matchTOTP(secret, code string, now time.Time) (int64, bool) {
	if len(code) != int(totpDigits) {
		return 0, false
	}
	step := now.Unix() / totpPeriod
	var found int64
	ok := false
	for d := int64(-totpSkewSteps); d <= totpSkewSteps; d++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix((step+d)*totpPeriod, 0), totp.ValidateOpts{Period: totpPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			found, ok = step+d, true
		}
	}
	return found, ok
}

// newRecoveryCodes makes the recovery codes and their hashes.
func newRecoveryCodes() ([]string, [][]byte, error) {
	codes := make([]string, recoveryCodes)
	hashes := make([][]byte, recoveryCodes)
	for i := range codes {
		var b [recoveryCodeBytes]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		raw := recoveryEncoding.EncodeToString(b[:])
		codes[i] = raw[0:4] + "-" + raw[4:8] + "-" + raw[8:12] + "-" + raw[12:16]
		hashes[i] = recoveryHash(codes[i])
	}
	return codes, hashes, nil
}

// recoveryHash is SHA-256 of a recovery code as typed, upper-cased without
// dashes and spaces.
func recoveryHash(code string) []byte {
	norm := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToUpper(code))
	sum := sha256.Sum256([]byte(norm))
	return sum[:]
}
