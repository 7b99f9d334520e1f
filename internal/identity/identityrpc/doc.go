// Package identityrpc is the transport of the identity domain: the Connect
// handlers of billing.identity.IdentityService and CustomerAdminService
// (decode, call internal/identity, encode; a credential leaves only in a
// response, marked no-store, or in the session cookie), their permission
// tables Policy and CustomerAdminPolicy, and EnrolmentProcedures, what a
// session may call while its admin must enrol a second factor. The
// second-factor refusals become Connect errors with their ErrorInfo and
// RetryInfo details here. The rules live in internal/identity.
package identityrpc
