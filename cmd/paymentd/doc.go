// Command paymentd is the payment service and its operator's tools.
//
//	paymentd serve   [--config FILE]           run the service
//	paymentd dev     [--config FILE]           run it on a local database with a dev config
//	paymentd migrate [--config FILE] up|down|status
//	paymentd config check [--config FILE]      validate, print the effective configuration
//	paymentd admin create-admin|reset-password|disable|enable --username U [--password-file F] [--keep-keys]
//	paymentd verify  [--config FILE]           the ledger check
//	paymentd secrets rotate [--config FILE]    encrypt every stored secret under [secrets].current
//	paymentd dev fake-epay [--addr 127.0.0.1:8090] [--public-url URL]
//	paymentd dev fake-alipay [--addr 127.0.0.1:8092] [--key-dir DIR]
//	paymentd dev fake-wechatpay [--addr 127.0.0.1:8093] [--key-dir DIR]
//	paymentd dev fake-provider [--addr 127.0.0.1:8091] [--token TOKEN]
//	paymentd plugin check FILE
//	paymentd version
//
// Exit status: 0 success, 1 failure (including a check that found a
// problem), 2 a bad command line or configuration, or a database whose
// schema is not the one this build expects (internal/migrate's schema
// check).
package main
