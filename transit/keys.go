package transit

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// The key routes: create, read, list, delete, rotate, config. Each
// answers the key as Vault's engine describes one (keyData).

// keyData is the data of Vault's answer describing a key.
// The keys map has, for each version, its creation time in Unix seconds;
// for an asymmetric key, an object with its public key, the key's name
// (P-256, rsa-2048...) and its creation time (RFC 3339), as Vault's.
func keyData(k *kms.HeldKey) map[string]any {
	versions := make(map[string]any, len(k.Versions))
	for v, at := range k.Versions {
		if k.Asymmetric {
			versions[strconv.Itoa(v)] = map[string]any{"public_key": k.PublicKeys[v], "name": k.PublicKeyName,
				"creation_time": at.UTC().Format(time.RFC3339Nano)}
			continue
		}
		versions[strconv.Itoa(v)] = at.Unix()
	}
	data := map[string]any{
		"name":                   k.Name,
		"type":                   k.Type,
		"keys":                   versions,
		"latest_version":         k.LatestVersion,
		"min_available_version":  0,
		"min_decryption_version": k.MinDecryptionVersion,
		"min_encryption_version": k.MinEncryptionVersion,
		"deletion_allowed":       k.DeletionAllowed,
		"auto_rotate_period":     int64(k.RotationPeriod / time.Second),
		"derived":                false,
		"exportable":             k.Exportable,
		"allow_plaintext_backup": false,
		"imported_key":           false,
		"supports_encryption":    k.Encrypts,
		"supports_decryption":    k.Encrypts,
		"supports_derivation":    false,
		"supports_signing":       k.Signs,
	}
	if k.KeySize != 0 {
		data["key_size"] = k.KeySize
	}
	if k.ParameterSet != "" {
		data["parameter_set"] = k.ParameterSet
	}
	return data
}

// POST keys/:name: make the key (an /asym ring), or answer the one that
// exists with a warning, as Vault does.
func (a *api) createKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	if err := p.unsupported("derived", "convergent_encryption", "allow_plaintext_backup", "managed_key_name", "managed_key_id"); err != nil {
		return nil, err
	}
	name := ps.ByName("name")
	in, err := p.newKeyParams(name)
	if err != nil {
		return nil, err
	}
	k, err := a.svc.CreateHeldKey(r.Context(), in)
	if err != nil {
		return nil, err
	}
	ans := &answer{data: keyData(k)}
	if k.Existed {
		ans.warnings = []string{fmt.Sprintf("key %s already existed", name)}
	}
	return ans, nil
}

// GET keys/:name.
func (a *api) readKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	k, err := a.svc.GetHeldKey(r.Context(), ps.ByName("name"))
	if err != nil {
		return nil, err
	}
	return &answer{data: keyData(k)}, nil
}

// DELETE keys/:name: 204, as Vault answers it.
func (a *api) deleteKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	if err := a.svc.DeleteHeldKey(r.Context(), ps.ByName("name")); err != nil {
		return nil, err
	}
	return &answer{}, nil
}

// LIST keys: the names, or 404 when there is none, as Vault answers an
// empty list.
func (a *api) listKeys(r *http.Request, _ httprouter.Params) (*answer, error) {
	names, err := a.svc.ListHeldKeys(r.Context())
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, kms.Errorf(kms.KindNotFound, "no transit keys")
	}
	return &answer{data: map[string]any{"keys": names}}, nil
}

// GET keys?list=true is LIST keys, as Vault's clients send it; GET keys
// alone has no operation.
func (a *api) listKeysGet(r *http.Request, ps httprouter.Params) (*answer, error) {
	if list, _ := strconv.ParseBool(r.URL.Query().Get("list")); !list {
		return nil, errUnsupportedOperation
	}
	return a.listKeys(r, ps)
}

// errUnsupportedOperation answers an operation a path lacks, as Vault
// does.
var errUnsupportedOperation = &httpedge.StatusError{Status: http.StatusMethodNotAllowed, Message: "1 error occurred:\n\t* unsupported operation\n\n"}

// POST keys/:name/rotate.
func (a *api) rotateKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	if _, err := a.readParams(r); err != nil {
		return nil, err
	}
	k, err := a.svc.RotateHeldKey(r.Context(), ps.ByName("name"))
	if err != nil {
		return nil, err
	}
	return &answer{data: keyData(k)}, nil
}

// POST keys/:name/config: the parameters given change; the others stay.
func (a *api) configKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	if err := p.unsupported("allow_plaintext_backup"); err != nil {
		return nil, err
	}
	var cfg kms.HeldKeyConfig
	var warnings []string
	if err := readGiven(p, p.integer, setting[int]{"min_decryption_version", &cfg.MinDecryptionVersion},
		setting[int]{"min_encryption_version", &cfg.MinEncryptionVersion}); err != nil {
		return nil, err
	}
	if v := cfg.MinDecryptionVersion; v != nil && *v == 0 {
		warnings = append(warnings, "since Vault 0.3, transit key numbering starts at 1; forcing minimum to 1")
	}
	if err := readGiven(p, p.boolean, setting[bool]{"deletion_allowed", &cfg.DeletionAllowed},
		setting[bool]{"exportable", &cfg.Exportable}); err != nil {
		return nil, err
	}
	if d, ok, err := p.seconds("auto_rotate_period"); err != nil {
		return nil, err
	} else if ok {
		cfg.RotationPeriod = &d
	}
	k, err := a.svc.ConfigureHeldKey(r.Context(), ps.ByName("name"), cfg)
	if err != nil {
		return nil, err
	}
	return &answer{data: keyData(k), warnings: warnings}, nil
}
