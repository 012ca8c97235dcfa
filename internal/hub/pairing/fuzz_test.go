package pairing

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

var fixedMessage = regexp.MustCompile(`^(that is too long for a pairing code; codes look like ABCD-EF23` +
	`|pairing code has a character codes never use; codes are letters except I, L and O, and digits 2-9, like ABCD-EF23` +
	`|a pairing code has 8 characters, like ABCD-EF23; that had \d+)$`)

// FuzzNormalize: any input is either a code of 8 alphabet characters or a
// wrong-code error with a fixed message, which never repeats the input.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"ABCD-EF23", " abcd ef23 ", "ABCD-EF2O", "", "\xff", strings.Repeat("A-", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Normalize(in)
		if err != nil {
			if !errors.Is(err, ErrWrongCode) {
				t.Fatalf("Normalize(%q): %v, want ErrWrongCode", in, err)
			}
			if !fixedMessage.MatchString(err.Error()) {
				t.Fatalf("error %q: not one of the fixed messages (which never repeat the input)", err)
			}
			return
		}
		if len(got) != codeLen || strings.Trim(got, Alphabet) != "" {
			t.Fatalf("Normalize(%q) = %q: not 8 characters of the alphabet", in, got)
		}
	})
}

// FuzzValidate: any request is either accepted with fields that fit the
// limits, or refused with ErrInvalid.
func FuzzValidate(f *testing.F) {
	f.Add(make([]byte, 32), "host", "linux", "amd64", "name", "v1.0.0")
	f.Add([]byte("short"), "h\x00st", "Linux", "x86 64", strings.Repeat("n", 100), "1; rm")
	f.Fuzz(func(t *testing.T, key []byte, host, os, arch, name, version string) {
		m, err := validate(MachineRequest{PublicKey: key, Hostname: host, OS: os, Arch: arch, Name: name, Version: version})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("validate: %v, want ErrInvalid", err)
			}
			return
		}
		if len(m.PublicKey) != 32 || m.Hostname == "" || len(m.Hostname) > maxHostname || m.Name == "" {
			t.Fatalf("validate accepted %+v", m)
		}
		if err := text("name", m.Name, maxName, true); err != nil {
			t.Fatalf("validate accepted a name that fails its own check: %v", err)
		}
	})
}
