package identityrpc

import (
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/auth"
)

// Policy is who may call each IdentityService procedure. CreateApiKey and
// RevokeApiKey are refused (PermissionDenied) to a customer authenticated by
// an API key as well; the operations check that themselves, since the table
// knows roles, not credential kinds.
var Policy = auth.Policy{
	identitypbconnect.IdentityServiceRegisterProcedure:     auth.Public,
	identitypbconnect.IdentityServiceLoginProcedure:        auth.Public,
	identitypbconnect.IdentityServiceAdminLoginProcedure:   auth.Public,
	identitypbconnect.IdentityServiceLogoutProcedure:       auth.AdminOnly,
	identitypbconnect.IdentityServiceGetMeProcedure:        auth.Authenticated,
	identitypbconnect.IdentityServiceCreateApiKeyProcedure: auth.CustomerOnly,
	identitypbconnect.IdentityServiceListApiKeysProcedure:  auth.CustomerOnly,
	identitypbconnect.IdentityServiceRevokeApiKeyProcedure: auth.CustomerOnly,
	// A customer with an access token or an admin with a session; the
	// operation refuses API keys.
	identitypbconnect.IdentityServiceChangePasswordProcedure: auth.Authenticated,
	// Admins with a session; the operations refuse API keys.
	identitypbconnect.IdentityServiceCreateAdminApiKeyProcedure:    auth.AdminOnly,
	identitypbconnect.IdentityServiceListAdminApiKeysProcedure:     auth.AdminOnly,
	identitypbconnect.IdentityServiceRevokeAdminApiKeyProcedure:    auth.AdminOnly,
	identitypbconnect.IdentityServiceStartTotpEnrolmentProcedure:   auth.AdminOnly,
	identitypbconnect.IdentityServiceConfirmTotpEnrolmentProcedure: auth.AdminOnly,
	identitypbconnect.IdentityServiceDisableTotpProcedure:          auth.AdminOnly,
}

// EnrolmentProcedures are what an admin session may call while its admin
// must enrol a second factor first ([admin].require_2fa): who it is, the
// enrolment, and logging out.
var EnrolmentProcedures = []string{
	identitypbconnect.IdentityServiceGetMeProcedure,
	identitypbconnect.IdentityServiceLogoutProcedure,
	identitypbconnect.IdentityServiceStartTotpEnrolmentProcedure,
	identitypbconnect.IdentityServiceConfirmTotpEnrolmentProcedure,
}

// CustomerAdminPolicy is who may call each CustomerAdminService procedure:
// admins only.
var CustomerAdminPolicy = auth.Policy{
	identitypbconnect.CustomerAdminServiceListCustomersProcedure:       auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceGetCustomerProcedure:         auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceSetCanCreateApiKeysProcedure: auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceAdjustBalanceProcedure:       auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceSetCreditLimitProcedure:      auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceDisableCustomerProcedure:     auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceEnableCustomerProcedure:      auth.AdminOnly,
	identitypbconnect.CustomerAdminServiceSignOutEverywhereProcedure:   auth.AdminOnly,
}
