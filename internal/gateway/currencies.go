package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rustbill/paymentd/internal/money"
)

// CurrenciesKey is the key, in info() and in an interface's config, that
// names the currencies a gateway takes (docs/plugins.md).
const CurrenciesKey = "currencies"

// accountCurrencies is the one-entry info().currencies of a plugin whose
// currencies depend on the merchant account: each interface names its own
// in its config (bank_transfer: the bank account's currency).
const accountCurrencies = "*"

// declaredCurrencies is what a gateway plugin's info().currencies says.
//
// A plugin that declares nothing takes no currency: its interfaces keep
// settling and refunding the payments already made through them, but take
// no new payment. Sending an amount to a gateway that books it in another
// currency charges the customer the same figure in the wrong money, so the
// service never assumes what a plugin did not say (docs/decisions.md).
type declaredCurrencies struct {
	// codes are the ISO 4217 codes a plugin takes whatever its account,
	// sorted; nil with byAccount or when the plugin declares nothing.
	codes []string
	// byAccount: info().currencies is ["*"]; an interface takes what its
	// config's "currencies" names, and nothing when it names none.
	byAccount bool
}

// parseDeclaredCurrencies reads info().currencies from a gateway plugin's
// info JSON. Absent (or null) means nothing declared; anything present must
// be a non-empty array of distinct ISO 4217 codes (three capital letters),
// or exactly ["*"].
func parseDeclaredCurrencies(info []byte) (declaredCurrencies, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(info, &obj); err != nil {
		return declaredCurrencies{}, fmt.Errorf("info() is not a JSON object")
	}
	raw, ok := obj[CurrenciesKey]
	if !ok || string(raw) == "null" {
		return declaredCurrencies{}, nil
	}
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		return declaredCurrencies{}, fmt.Errorf(`info().currencies must be an array of ISO 4217 codes such as ["CNY"], or ["*"] when each interface's config names its account's currencies`)
	}
	codes, err := currencyList(list, "info().currencies")
	if err != nil {
		return declaredCurrencies{}, err
	}
	if slices.Contains(codes, accountCurrencies) {
		if len(codes) != 1 {
			return declaredCurrencies{}, fmt.Errorf(`info().currencies: "*" stands alone (the interface config names the currencies), not beside codes`)
		}
		return declaredCurrencies{byAccount: true}, nil
	}
	return declaredCurrencies{codes: codes}, nil
}

// currencyList checks a JSON array of currency codes (with "*" allowed,
// for the caller to judge) and returns it sorted.
func currencyList(list []any, what string) ([]string, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("%s must not be empty", what)
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok || (s != accountCurrencies && !money.IsCurrencyCode(s)) {
			return nil, fmt.Errorf("%s: %s is not an ISO 4217 code of three capital letters", what, describe(v))
		}
		if slices.Contains(out, s) {
			return nil, fmt.Errorf("%s names %s twice", what, s)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return "a value"
	}
	return string(b)
}

// checkSchemaDeclaresCurrencies makes sure a plugin whose interfaces name
// their currencies can be given them: its config schema must have a
// "currencies" array property (else no interface could take anything, and
// additionalProperties: false would refuse the key).
func checkSchemaDeclaresCurrencies(schema []byte) error {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	p, ok := s.Properties[CurrenciesKey]
	if !ok || p.Type != "array" {
		return fmt.Errorf(`info().currencies is ["*"] (each interface names its account's currencies), but config_schema() declares no "currencies" property of type array for an interface to name them in`)
	}
	return nil
}

// of is what an interface with config takes: the declared codes, narrowed
// to those its config's "currencies" names when it names any; for a
// byAccount plugin exactly what the config names. A config value that is
// not a list of codes takes nothing: the service fails closed, and the
// admin sees why when saving it (configCurrencyProblems).
func (d declaredCurrencies) of(config []byte) []string {
	if d.codes == nil && !d.byAccount {
		return nil
	}
	var cfg map[string]json.RawMessage
	_ = json.Unmarshal(config, &cfg)
	raw, named := cfg[CurrenciesKey]
	if !named {
		return d.codes // nil for byAccount: the account's currency is unknown
	}
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil
	}
	codes, err := currencyList(list, CurrenciesKey)
	if err != nil || slices.Contains(codes, accountCurrencies) {
		return nil
	}
	if d.byAccount {
		return codes
	}
	return slices.DeleteFunc(codes, func(c string) bool { return !slices.Contains(d.codes, c) })
}

// configCurrencyProblems says what is wrong with the "currencies" of an
// interface config, given its plugin's info: not a list of codes, or a
// currency the plugin does not take. A config without the key has none.
func configCurrencyProblems(info []byte, cfg map[string]any) []string {
	v, named := cfg[CurrenciesKey]
	if !named {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return []string{"currencies: must be an array of ISO 4217 codes"}
	}
	codes, err := currencyList(list, CurrenciesKey)
	if err != nil {
		return []string{err.Error()}
	}
	if slices.Contains(codes, accountCurrencies) {
		return []string{`currencies: "*" is for a plugin's info(); an interface names its currencies`}
	}
	d, err := parseDeclaredCurrencies(info)
	if err != nil || d.byAccount {
		return nil
	}
	var foreign []string
	for _, c := range codes {
		if !slices.Contains(d.codes, c) {
			foreign = append(foreign, c)
		}
	}
	if len(foreign) > 0 {
		takes := "none"
		if len(d.codes) > 0 {
			takes = strings.Join(d.codes, ", ")
		}
		return []string{fmt.Sprintf("currencies: the plugin does not take %s (it takes %s)", strings.Join(foreign, ", "), takes)}
	}
	return nil
}
