package tmpl

import (
	"fmt"
	"regexp"
)

// unavailable are sprig's functions that templates do not get, and why.
// Whoever may create an Installation must not read the controller's
// environment (credentials of its exporters, its configuration), make it
// send DNS queries (a lookup blocks a worker as long as the resolver takes
// and can carry data out in the names it asks for), nor spend the CPU every
// worker shares on generating keys and hashing passwords, which take tens of
// milliseconds to seconds a call, far more than a render's other steps.
var unavailable = map[string]string{
	"env":                      "it reads the controller's environment",
	"expandenv":                "it reads the controller's environment",
	"getHostByName":            "it makes the controller send DNS queries",
	"genPrivateKey":            "it generates keys",
	"genCA":                    "it generates keys",
	"genCAWithKey":             "it signs certificates",
	"genSelfSignedCert":        "it generates keys",
	"genSelfSignedCertWithKey": "it signs certificates",
	"genSignedCert":            "it generates keys",
	"genSignedCertWithKey":     "it signs certificates",
	"derivePassword":           "it derives keys with scrypt",
	"bcrypt":                   "it hashes passwords with bcrypt",
	"htpasswd":                 "it hashes passwords with bcrypt",
	"encryptAES":               "it derives keys and encrypts",
	"decryptAES":               "it derives keys and decrypts",
}

// undefinedFunc finds text/template's parse error for a function that is
// not in the FuncMap.
var undefinedFunc = regexp.MustCompile(`function "([^"]+)" not defined`)

// unavailableCause says, for a parse error naming an unavailable function,
// that Terrace leaves it out and why, instead of "not defined".
func unavailableCause(cause string) string {
	m := undefinedFunc.FindStringSubmatch(cause)
	if m == nil {
		return cause
	}
	why, ok := unavailable[m[1]]
	if !ok {
		return cause
	}
	return fmt.Sprintf("function %s is not available in Terrace templates: %s", m[1], why)
}
