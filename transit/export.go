package transit

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
)

// GET export/:type/:name[/:version]: versions of a key, as Vault answers
// them (data.name, data.type, data.keys: version -> the key's text of
// the type: encryption-key, signing-key, hmac-key or public-key). The
// Service decides who may (keyring.<name>.export; .read for a public
// key) and what is exportable.
func (a *api) exportKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	in := kms.ExportHeldKeyInput{Name: ps.ByName("name"), Kind: ps.ByName("type")}
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
		keys[strconv.Itoa(k.Version)] = k.Text
	}
	return &answer{data: map[string]any{"name": out.Name, "type": out.Type, "keys": keys}}, nil
}
