package transit

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
)

// exportType is the one export type of Vault's that ringkms's transit
// keys have: their AES-256 keys.
const exportType = "encryption-key"

// GET export/:type/:name[/:version]: versions of an exportable key, in
// the clear, as Vault answers them (data.name, data.type, data.keys:
// version -> base64 of the key). The Service decides who may
// (keyring.<name>.export) and what is exportable.
func (a *api) exportKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	if typ := ps.ByName("type"); typ != exportType {
		return nil, kms.Errorf(kms.KindInvalid, "invalid export type %q: ringkms's transit keys export %s only (docs/TRANSIT.md)", typ, exportType)
	}
	in := kms.ExportHeldKeyInput{Name: ps.ByName("name")}
	switch v := ps.ByName("version"); v {
	case "":
	case "latest":
		in.Latest = true
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, kms.Errorf(kms.KindInvalid, "invalid key version: want a version of the key, or latest")
		}
		in.Version = n
	}
	out, err := a.svc.ExportHeldKey(r.Context(), in)
	if err != nil {
		return nil, err
	}
	defer out.Clear()
	keys := make(map[string]string, len(out.Keys))
	for _, k := range out.Keys {
		keys[strconv.Itoa(k.Version)] = base64.StdEncoding.EncodeToString(k.Key)
	}
	return &answer{data: map[string]any{"name": out.Name, "type": kms.TransitKeyType, "keys": keys}}, nil
}
